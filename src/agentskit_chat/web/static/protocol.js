// The turn protocol (agentskit.chat.turn v1) and ordered assistant content, as the page uses them.
// Everything that arrives from the server is checked here before anything is shown.

export const TURN_PROTOCOL = "agentskit.chat.turn";
export const COMPONENT_PROTOCOL = "agentskit.chat.component";
const CONTENT_ROOT = "\u001eagentskit.chat.content/";
const CONTENT_PREFIX = CONTENT_ROOT + "1\n";
const CONTENT_MAX_BYTES = 262144;
const CONTENT_MAX_RECORDS = 512;
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const COMPONENT_KEY = /^[a-z][a-z0-9-]{0,63}$/;

export function isSafeId(value) {
  return typeof value === "string" && SAFE_ID.test(value);
}

export function newId(prefix) {
  return `${prefix}-${crypto.randomUUID()}`;
}

/**
 * A `client.turn.submit` event; `extra` may carry selection, interaction, confirmation or
 * operation.
 */
export function submitEvent(sessionId, input, extra = {}) {
  return {
    protocol: TURN_PROTOCOL,
    version: 1,
    eventId: newId("event"),
    sessionId,
    turnId: newId("turn"),
    sequence: 0,
    emittedAt: new Date().toISOString(),
    event: "client.turn.submit",
    payload: { input, ...extra },
  };
}

/**
 * `payload.interaction` for a shown frame: `{instanceId, componentKey, event, value?}`
 * (`value` is left out when `undefined`; `null` is a value).
 */
export function interactionOf(frame, event, value) {
  const interaction = { instanceId: frame.instanceId, componentKey: frame.componentKey, event };
  if (value !== undefined) interaction.value = value;
  return interaction;
}

/** The component `select` event for one choice of a shown frame. */
export function selectEvent(frame, choiceId) {
  return {
    protocol: COMPONENT_PROTOCOL,
    version: 1,
    type: "select",
    componentKey: frame.componentKey,
    instanceId: frame.instanceId,
    choiceId,
  };
}

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isSnapshot(event) {
  return (
    isObject(event) &&
    event.protocol === TURN_PROTOCOL &&
    event.version === 1 &&
    event.event === "server.turn.snapshot" &&
    isSafeId(event.sessionId) &&
    Number.isSafeInteger(event.sequence) &&
    event.sequence >= 0 &&
    isObject(event.payload) &&
    Array.isArray(event.payload.messages) &&
    event.payload.messages.every(isMessage)
  );
}

const ROLES = new Set(["user", "assistant", "system", "tool"]);
const STATUSES = new Set(["pending", "streaming", "complete", "error"]);

function isMessage(message) {
  return (
    isObject(message) &&
    typeof message.id === "string" &&
    message.id.length > 0 &&
    ROLES.has(message.role) &&
    typeof message.content === "string" &&
    STATUSES.has(message.status) &&
    (message.toolCalls === undefined || Array.isArray(message.toolCalls))
  );
}

/** Holds the newest snapshot of one session: foreign, stale and duplicate ones are ignored. */
export class SnapshotCursor {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.snapshot = null;
  }

  apply(event) {
    if (!isSnapshot(event) || event.sessionId !== this.sessionId) return false;
    if (this.snapshot !== null && event.sequence <= this.snapshot.sequence) return false;
    this.snapshot = event;
    return true;
  }
}

/** Reads NDJSON lines from a fetch response body, calling `onLine` with each parsed value. */
export async function readLines(response, onLine) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let newline = buffered.indexOf("\n");
    while (newline >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.trim()) {
        let parsed;
        try {
          parsed = JSON.parse(line);
        } catch {
          parsed = undefined;
        }
        if (parsed !== undefined) onLine(parsed);
      }
      newline = buffered.indexOf("\n");
    }
  }
}

function isFallback(value) {
  return (
    isObject(value) &&
    typeof value.kind === "string" &&
    value.kind.length >= 1 &&
    value.kind.length <= 64 &&
    typeof value.summary === "string" &&
    value.summary.length >= 1 &&
    value.summary.length <= 4096
  );
}

/** The bounded JSON rule of props: at most 1,000 nodes, depth 20, strings 16,384 units. */
export function isBoundedJson(root) {
  let nodes = 0;
  const walk = (value, depth) => {
    nodes += 1;
    if (nodes > 1000 || depth > 20) return false;
    if (value === null || typeof value === "boolean") return true;
    if (typeof value === "string") return value.length <= 16384;
    if (typeof value === "number") return Number.isFinite(value);
    if (Array.isArray(value)) {
      if (value.length > 1000) return false;
      return value.every((item) => walk(item, depth + 1));
    }
    if (isObject(value)) {
      const keys = Object.keys(value);
      if (keys.length > 1000 || keys.some((key) => key.length > 256)) return false;
      return keys.every((key) => walk(value[key], depth + 1));
    }
    return false;
  };
  try {
    return walk(root, 0);
  } catch {
    return false;
  }
}

/** A render frame envelope (structure only: the component's own props are checked later). */
export function isRenderFrame(frame) {
  return (
    isObject(frame) &&
    frame.protocol === COMPONENT_PROTOCOL &&
    frame.version === 1 &&
    frame.type === "render" &&
    typeof frame.componentKey === "string" &&
    COMPONENT_KEY.test(frame.componentKey) &&
    isSafeId(frame.instanceId) &&
    Object.prototype.hasOwnProperty.call(frame, "props") &&
    isBoundedJson(frame.props) &&
    isFallback(frame.fallback)
  );
}

const INVALID_ENVELOPE = "Assistant content envelope is invalid.";

function failed(code, message) {
  return { ok: false, code, message };
}

// JSON text of one record: surrounding JSON white space (space, tab, CR) is allowed.
function parseRecord(record) {
  if (/^[ \t\r]*$/.test(record)) return undefined;
  try {
    return JSON.parse(record);
  } catch {
    return undefined;
  }
}

function decodePart(part) {
  if (!isObject(part)) return null;
  if (part.kind === "text") {
    if (typeof part.text !== "string" || part.text.length < 1 || part.text.length > 16384) {
      return null;
    }
    return { kind: "text", text: part.text };
  }
  if (part.kind === "component" && isRenderFrame(part.frame)) {
    const { protocol, version, type, componentKey, instanceId, props, fallback } = part.frame;
    return {
      kind: "component",
      frame: {
        protocol,
        version,
        type,
        componentKey,
        instanceId,
        props,
        fallback: { kind: fallback.kind, summary: fallback.summary },
      },
    };
  }
  return null;
}

/**
 * Ordered assistant content (`agentskit.chat.content/1`), decoded as the protocol says:
 * `{ok: true, parts, complete}` or `{ok: false, code, message}`.
 */
export function decodeAssistantContent(content) {
  if (typeof content !== "string" || !content.startsWith("\u001e")) {
    return failed("ASSISTANT_CONTENT_INVALID_RECORD", INVALID_ENVELOPE);
  }
  if (!content.startsWith(CONTENT_ROOT)) {
    if (CONTENT_ROOT.startsWith(content)) return { ok: true, parts: [], complete: false };
    return failed("ASSISTANT_CONTENT_INVALID_RECORD", INVALID_ENVELOPE);
  }
  if (CONTENT_PREFIX.startsWith(content)) return { ok: true, parts: [], complete: false };
  if (!content.startsWith(CONTENT_PREFIX)) {
    return failed(
      "ASSISTANT_CONTENT_UNSUPPORTED_VERSION",
      "Assistant content envelope uses an unsupported version.",
    );
  }
  if (new TextEncoder().encode(content).length > CONTENT_MAX_BYTES) {
    return failed(
      "ASSISTANT_CONTENT_LIMIT_EXCEEDED",
      "Assistant content envelope exceeds its safety limit.",
    );
  }
  const payload = content.slice(CONTENT_PREFIX.length);
  const records = payload.split("\n");
  records.pop(); // the empty string after the last LF, or an incomplete record
  if (records.length > CONTENT_MAX_RECORDS) {
    return failed(
      "ASSISTANT_CONTENT_LIMIT_EXCEEDED",
      "Assistant content envelope exceeds its record limit.",
    );
  }
  const parts = [];
  for (const record of records) {
    const part = record === "" ? null : decodePart(parseRecord(record));
    if (part === null) {
      return failed("ASSISTANT_CONTENT_INVALID_RECORD", "Assistant content record is invalid.");
    }
    parts.push(part);
  }
  return { ok: true, parts, complete: payload.endsWith("\n") };
}

/**
 * The parts of an assistant message: `{parts, complete}`, or `{invalid: true}` when the
 * content is an envelope (or a frame) that cannot be read. Plain text is one text part.
 */
export function decodeContent(content) {
  if (!content.startsWith("\u001e")) {
    const frame = wholeMessageFrame(content);
    if (frame === false) return { invalid: true };
    if (frame !== null) return { parts: [{ kind: "component", frame }], complete: true };
    return { parts: content ? [{ kind: "text", text: content }] : [], complete: true };
  }
  const decoded = decodeAssistantContent(content);
  return decoded.ok ? decoded : { invalid: true };
}

// A message whose whole content is one component frame (JSON): the frame, `false` when it is
// a frame that cannot be read, `null` for any other text.
function wholeMessageFrame(content) {
  if (!content.trimStart().startsWith("{")) return null;
  let value;
  try {
    value = JSON.parse(content);
  } catch {
    return null;
  }
  if (!isObject(value) || value.protocol !== COMPONENT_PROTOCOL) return null;
  return isRenderFrame(value) ? value : false;
}

/** The text every renderer shows for a component it cannot render. */
export function fallbackText(fallback) {
  return `[unsupported visual: ${fallback.kind}] ${fallback.summary}`;
}
