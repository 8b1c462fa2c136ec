// The chat page: one session, turns submitted to /api/chat, full snapshots applied through a
// cursor, every message rendered from the newest snapshot.
import {
  SnapshotCursor,
  decodeContent,
  interactionOf,
  isSafeId,
  newId,
  readLines,
  selectEvent,
  submitEvent,
} from "./protocol.js";
import { loadCatalog, renderFrame, resolves } from "./components.js";
import { el, renderMarkdown, safeHref } from "./markdown.js";

// Every address is relative to the page, so the chat works wherever its app is mounted
// (``/``, or ``/support/`` inside a bigger site). A chat not at the root keeps its session and
// key apart from the other chats of the same site.
const ENDPOINT = "api/chat";
const MOUNT = new URL(".", document.baseURI).pathname;
const SCOPE = MOUNT === "/" ? "" : `:${MOUNT}`;
const SESSION_KEY = `agentskit.chat.session${SCOPE}`;
const API_KEY = `agentskit.chat.apiKey${SCOPE}`;
const UNCHANGED = "Regenerated: the answer is the same as before. Rephrase the question for a different one.";

const $ = (id) => document.getElementById(id);
const log = $("log");
const input = $("composer-input");
const composer = $("composer");
const sendButton = $("send");
const stopButton = $("stop");
const notice = $("notice");
const status = $("status");
const empty = $("empty");
const keyForm = $("key-form");

const page = {
  sessionId: null,
  cursor: null,
  streaming: false,
  abort: null,
  rendered: new Map(), // message id -> {signature, node}
  drafts: new Map(), // form instance id -> {field id: what was typed}, kept across renders
  lastSubmit: null,
};

function startSession(id) {
  page.sessionId = id;
  page.cursor = new SnapshotCursor(id);
  page.rendered.clear();
  page.drafts.clear();
  log.replaceChildren();
  localStorage.setItem(SESSION_KEY, id);
}

function headers() {
  const result = { "content-type": "application/json" };
  const key = sessionStorage.getItem(API_KEY);
  if (key) result.authorization = `Bearer ${key}`;
  return result;
}

function showNotice(text, tone = "error") {
  notice.textContent = text;
  notice.classList.toggle("notice-info", tone === "info");
  notice.hidden = false;
}

function clearNotice() {
  notice.hidden = true;
  notice.textContent = "";
}

function announce(text) {
  status.textContent = text;
}

function setStreaming(on) {
  page.streaming = on;
  stopButton.hidden = !on;
  sendButton.hidden = on;
  log.setAttribute("aria-busy", on ? "true" : "false");
  document.body.classList.toggle("streaming", on);
}

// --- rendering ------------------------------------------------------------------------------

function control(label, onClick, className = "link-button") {
  const node = el("button", className, label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

// The numbered sources of an answer: the entries of its (valid) source list, with safe links.
function citationsOf(parts) {
  const frame = parts.find(
    (part) => part.kind === "component" && part.frame.componentKey === "source-list" && resolves(part.frame),
  );
  if (!frame) return [];
  return frame.frame.props.sources.map((source) => {
    const href = source.url ? safeHref(source.url) : null;
    return href === null ? null : { href, title: source.title };
  });
}

function renderContent(message, ctx) {
  const body = el("div", "body");
  if (message.role !== "assistant") {
    for (const line of message.content.split("\n\n")) body.append(el("p", null, line));
    return body;
  }
  const decoded = decodeContent(message.content);
  if (decoded.invalid) {
    body.append(el("p", "diagnostic", "This answer could not be shown."));
    return body;
  }
  const citations = citationsOf(decoded.parts);
  let text = "";
  const flush = () => {
    if (text) body.append(renderMarkdown(text, citations));
    text = "";
  };
  for (const part of decoded.parts) {
    if (part.kind === "text") {
      text += part.text;
    } else {
      flush();
      body.append(renderFrame(part.frame, ctx));
    }
  }
  flush();
  return body;
}

// What a call's status means to a reader (a denied call never ran: it did not fail).
const CALL_STATUS = { pending: "waiting", running: "running", complete: "done", error: "failed" };

function callStatus(call) {
  if (call.status === "error" && String(call.error || "").startsWith("Permission denied: ")) {
    return "not run (rejected)";
  }
  return CALL_STATUS[call.status] || call.status;
}

function renderToolCalls(message, ctx) {
  const calls = message.toolCalls || [];
  const nodes = [];
  for (const call of calls) {
    if (call.status === "requires_confirmation") {
      const box = el("fieldset", "confirm");
      box.append(el("legend", null, `Run “${call.name}”?`));
      const args = el("pre", "args", JSON.stringify(call.args, null, 2));
      const row = el("div", "actions");
      const approve = control("Approve", () => decide(call.id, "approve"), "primary");
      const reject = control("Reject", () => decide(call.id, "reject"), "secondary");
      approve.disabled = reject.disabled = !ctx.interactive;
      row.append(approve, reject);
      box.append(args, row);
      nodes.push(box);
    } else {
      const line = el("p", `tool-status tool-${call.status}`);
      line.setAttribute("role", "status");
      line.textContent = `${call.name}: ${callStatus(call)}${call.result ? ` — ${call.result}` : ""}`;
      nodes.push(line);
    }
  }
  return nodes;
}

function messageNode(message, context) {
  const mine = message.role === "user";
  const node = el("article", `message ${message.role} status-${message.status}`);
  node.dataset.messageId = message.id;
  node.setAttribute("aria-label", mine ? "You said" : "The assistant answered");
  const ctx = {
    interactive: context.latest && !page.streaming,
    select: (frame, choice) => choose(frame, choice),
    interact: (frame, event, value, text) => interact(frame, event, value, text),
    decide: (toolCallId, decision) => decide(toolCallId, decision),
    pendingCall: (instanceId) =>
      (message.toolCalls || []).find((call) => call.id === instanceId && call.status === "requires_confirmation"),
    draft: (instanceId) => draftOf(instanceId),
    retry: () => operate("retry"),
  };
  node.append(renderContent(message, ctx), ...renderToolCalls(message, ctx));
  if (message.status === "streaming" && !context.stopped) {
    node.append(el("p", "typing", "Writing…"));
  }
  if (message.status === "error") {
    node.append(el("p", "diagnostic", "The answer failed."));
  }
  const tools = el("div", "message-tools");
  if (!page.streaming) {
    if (mine) tools.append(control("Edit", () => beginEdit(node, message)));
    if (context.lastAssistant) {
      if (message.status === "error") tools.append(control("Retry", () => operate("retry")));
      else tools.append(control("Regenerate", () => operate("regenerate", message.id)));
    }
  }
  if (tools.childElementCount) node.append(tools);
  return node;
}

function nearBottom() {
  const doc = document.documentElement;
  return doc.scrollHeight - (window.scrollY + window.innerHeight) < 160;
}

function render(snapshot, { stopped = false } = {}) {
  const follow = nearBottom() || page.streaming;
  const messages = snapshot.payload.messages.filter((m) => m.role === "user" || m.role === "assistant");
  empty.hidden = messages.length > 0;
  const lastAssistant = [...messages].reverse().find((m) => m.role === "assistant");
  const lastIndex = messages.length - 1;
  const keep = new Set();
  let previous = null;
  messages.forEach((message, index) => {
    const context = {
      latest: index === lastIndex,
      lastAssistant: lastAssistant !== undefined && message.id === lastAssistant.id,
      stopped,
    };
    const signature = JSON.stringify([
      message.content,
      message.status,
      message.toolCalls,
      context.latest,
      context.lastAssistant,
      page.streaming,
      stopped,
    ]);
    keep.add(message.id);
    const known = page.rendered.get(message.id);
    let node = known ? known.node : null;
    if (!known || known.signature !== signature) {
      const fresh = messageNode(message, context);
      if (node) node.replaceWith(fresh);
      node = fresh;
      page.rendered.set(message.id, { signature, node });
    }
    const expected = previous ? previous.nextSibling : log.firstChild;
    if (node !== expected) log.insertBefore(node, expected);
    previous = node;
  });
  for (const [id, entry] of page.rendered) {
    if (!keep.has(id)) {
      entry.node.remove();
      page.rendered.delete(id);
    }
  }
  if (follow) window.scrollTo({ top: document.documentElement.scrollHeight });
  if (snapshot.payload.status === "error" && !page.streaming) {
    showNotice("The answer failed. Use Retry to try again.");
  }
}

function rerender(options) {
  if (page.cursor.snapshot) render(page.cursor.snapshot, options);
}

// --- talking to the server -------------------------------------------------------------------

async function errorText(response) {
  try {
    const body = await response.json();
    if (body && body.error && typeof body.error.message === "string") return body.error.message;
  } catch {
    // fall through
  }
  return `The server answered ${response.status}.`;
}

async function submit(text, extra = {}, replaced = null) {
  if (page.streaming) return;
  clearNotice();
  const event = submitEvent(page.sessionId, text, extra);
  const abort = new AbortController();
  page.abort = abort;
  page.lastSubmit = { text, extra };
  setStreaming(true);
  rerender();
  announce("Answering…");
  let stopped = false;
  let failed = false;
  try {
    const response = await fetch(ENDPOINT, {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(event),
      signal: abort.signal,
      credentials: "same-origin",
    });
    if (response.status === 401) {
      failed = true;
      keyForm.hidden = false;
      showNotice("This server needs an API key.");
      return;
    }
    if (!response.ok) {
      failed = true;
      showNotice(await errorText(response));
      return;
    }
    await readLines(response, (line) => {
      if (line.event === "server.turn.diagnostic") {
        failed = true;
        if (line.payload && typeof line.payload.message === "string") showNotice(line.payload.message);
        return;
      }
      if (page.cursor.apply(line)) render(page.cursor.snapshot);
    });
  } catch (error) {
    if (abort.signal.aborted) {
      stopped = true;
    } else {
      failed = true;
      showNotice("The connection to the server failed.");
    }
  } finally {
    page.abort = null;
    setStreaming(false);
    rerender({ stopped });
    const snapshot = page.cursor.snapshot;
    if (snapshot && snapshot.payload.status === "error") failed = true;
    announce(stopped ? "Stopped." : failed ? "The answer failed." : "Answer complete.");
    if (!stopped && !failed && replaced !== null && lastAssistantText(null) === replaced) {
      showNotice(UNCHANGED, "info");
    }
    if (stopped) setTimeout(resume, 400); // what the server saved of the stopped answer
  }
}

async function resume() {
  try {
    const response = await fetch(`${ENDPOINT}?sessionId=${encodeURIComponent(page.sessionId)}`, {
      headers: headers(),
      credentials: "same-origin",
    });
    if (response.status === 401) {
      keyForm.hidden = false;
      showNotice("This server needs an API key.");
      return;
    }
    if (!response.ok) return;
    if (page.cursor.apply(await response.json()) && !page.streaming) render(page.cursor.snapshot);
  } catch {
    // The page still works: the next turn brings the conversation.
  }
}

function send(text) {
  const trimmed = text.trim();
  if (!trimmed) return;
  submit(trimmed);
}

function choose(frame, choice) {
  // A list is answered once: its buttons are disabled by the render that follows.
  submit(choice.label, { selection: selectEvent(frame, choice.id) });
}

function interact(frame, event, value, text) {
  // A frame answers once: the render that follows the answer disables it. A refusal leaves it
  // as it was (a form keeps what was typed) and says why in the notice.
  submit(text.trim() ? text : event, { interaction: interactionOf(frame, event, value) });
}

function draftOf(instanceId) {
  if (!page.drafts.has(instanceId)) page.drafts.set(instanceId, {});
  return page.drafts.get(instanceId);
}

function decide(toolCallId, decision) {
  submit(decision === "approve" ? "Approve" : "Reject", { confirmation: { toolCallId, decision } });
}

function operate(kind, messageId) {
  const operation = messageId ? { kind, messageId } : { kind };
  // A regenerated answer that comes back word for word (a chat without a model answers the
  // same question the same way) says so instead of looking like nothing happened.
  const replaced = kind === "regenerate" ? lastAssistantText(messageId) : null;
  submit(`/${kind}`, { operation }, replaced);
}

function lastAssistantText(messageId) {
  const snapshot = page.cursor.snapshot;
  const messages = snapshot ? snapshot.payload.messages : [];
  const found = messages.filter((m) => m.role === "assistant" && (!messageId || m.id === messageId));
  if (!found.length) return null;
  // A component's instance id is new on every answer; the words and props are what the reader sees.
  return String(found[found.length - 1].content).replace(/"instanceId":"[^"]*"/g, "");
}

function beginEdit(node, message) {
  const form = el("form", "edit-form");
  const label = el("label", "visually-hidden", "Edit your message");
  const area = el("textarea");
  area.id = `edit-${message.id}`;
  label.htmlFor = area.id;
  area.value = message.content;
  area.rows = 3;
  const save = el("button", "primary", "Save and ask");
  save.type = "submit";
  const cancel = control("Cancel", () => rerenderAll(), "secondary");
  form.append(label, area, save, cancel);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = area.value.trim();
    if (text) submit(text, { operation: { kind: "edit", messageId: message.id } });
  });
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") rerenderAll();
  });
  node.querySelector(".body").replaceWith(form);
  area.focus();
}

function rerenderAll() {
  page.rendered.clear();
  log.replaceChildren();
  rerender();
}

// --- wiring ---------------------------------------------------------------------------------

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value;
  if (!text.trim() || page.streaming) return;
  input.value = "";
  send(text);
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && page.streaming && page.abort) page.abort.abort();
});

stopButton.addEventListener("click", () => {
  if (page.abort) page.abort.abort();
});

$("new-chat").addEventListener("click", () => {
  clearNotice();
  startSession(newId("web"));
  empty.hidden = false;
  input.focus();
});

for (const suggestion of document.querySelectorAll("[data-ask]")) {
  suggestion.addEventListener("click", () => send(suggestion.dataset.ask));
}

keyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("api-key").value.trim();
  if (!value) return;
  sessionStorage.setItem(API_KEY, value);
  keyForm.hidden = true;
  clearNotice();
  resume();
});

async function main() {
  await loadCatalog();
  const stored = localStorage.getItem(SESSION_KEY);
  startSession(isSafeId(stored) ? stored : newId("web"));
  await resume();
  document.body.dataset.ready = "true";
}

main();
