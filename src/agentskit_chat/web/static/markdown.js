// Markdown to DOM. marked (vendored) only tokenizes; every node is built here with
// createElement and textContent, so raw HTML in an answer is shown as text and never parsed,
// and a link renders as a link only when its address is safe.
import { lexer } from "./vendor/marked.esm.js";

const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

/** `href` when it is a relative address or uses http(s)/mailto, otherwise `null`. */
export function safeHref(href) {
  if (typeof href !== "string" || href.length === 0 || href.length > 2048) return null;
  // Control characters and backslashes are never part of a portable address.
  if (/[\u0000-\u001f\u007f\\]/.test(href)) return null;
  if (href.startsWith("//")) return null;
  let url;
  try {
    url = new URL(href, window.location.origin);
  } catch {
    return null;
  }
  if (!SAFE_SCHEMES.has(url.protocol)) return null;
  return href;
}

/** Sets up a link that leaves the page without handing it the opener or the referrer. */
export function externalLink(anchor, href) {
  anchor.href = href;
  const url = new URL(href, window.location.origin);
  if (url.origin !== window.location.origin) {
    anchor.target = "_blank";
    anchor.rel = "noopener noreferrer";
  }
}

/** A new element; its text (when given) is set as text, never parsed. */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// "[2]" in an answer's text becomes a link to its second source, when the answer has one.
const CITATION = /\[(\d{1,2})\]/g;

function appendText(parent, text, citations) {
  if (!citations || citations.length === 0) {
    parent.append(document.createTextNode(text));
    return;
  }
  let last = 0;
  for (const match of text.matchAll(CITATION)) {
    const source = citations[Number(match[1]) - 1];
    if (!source) continue;
    parent.append(document.createTextNode(text.slice(last, match.index)));
    const link = el("a", "citation");
    externalLink(link, source.href);
    link.textContent = match[0];
    link.setAttribute("aria-label", `Source ${match[1]}: ${source.title}`);
    parent.append(link);
    last = match.index + match[0].length;
  }
  parent.append(document.createTextNode(text.slice(last)));
}

function inline(tokens, parent, citations) {
  for (const token of tokens || []) {
    switch (token.type) {
      case "strong":
      case "em":
      case "del": {
        const node = el(token.type === "del" ? "del" : token.type);
        inline(token.tokens, node, citations);
        parent.append(node);
        break;
      }
      case "codespan": {
        const node = el("code");
        node.textContent = token.text;
        parent.append(node);
        break;
      }
      case "br":
        parent.append(el("br"));
        break;
      case "link": {
        const href = safeHref(token.href);
        if (href === null) {
          inline(token.tokens, parent);
        } else {
          const node = el("a");
          externalLink(node, href);
          if (token.title) node.title = token.title;
          inline(token.tokens, node);
          parent.append(node);
        }
        break;
      }
      case "image": {
        // Images are shown as links to them: no remote content loads into the page.
        const href = safeHref(token.href);
        const label = `image: ${token.text || token.href}`;
        if (href === null) {
          parent.append(document.createTextNode(label));
        } else {
          const node = el("a");
          externalLink(node, href);
          node.textContent = label;
          parent.append(node);
        }
        break;
      }
      case "text":
        if (token.tokens && token.tokens.length) inline(token.tokens, parent, citations);
        else appendText(parent, decodeEntities(token.text), citations);
        break;
      case "escape":
        parent.append(document.createTextNode(token.text));
        break;
      case "html":
      default:
        parent.append(document.createTextNode(token.raw ?? token.text ?? ""));
    }
  }
}

// marked escapes some characters in text tokens; show them as the author wrote them.
function decodeEntities(text) {
  return text
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

function block(tokens, parent, depth, citations) {
  for (const token of tokens || []) {
    switch (token.type) {
      case "space":
        break;
      case "heading": {
        // Answers sit under the page's own headings: their levels start at h3.
        const node = el(`h${Math.min(6, token.depth + 2)}`);
        inline(token.tokens, node, citations);
        parent.append(node);
        break;
      }
      case "paragraph": {
        const node = el("p");
        inline(token.tokens, node, citations);
        parent.append(node);
        break;
      }
      case "text": {
        if (token.tokens) inline(token.tokens, parent, citations);
        else appendText(parent, decodeEntities(token.text), citations);
        break;
      }
      case "code": {
        const pre = el("pre");
        const code = el("code");
        code.textContent = token.text;
        if (token.lang && /^[A-Za-z0-9_+-]{1,32}$/.test(token.lang)) {
          code.className = `language-${token.lang}`;
        }
        pre.tabIndex = 0; // a long line scrolls: keyboard users can reach it
        pre.append(code);
        parent.append(pre);
        break;
      }
      case "blockquote": {
        const node = el("blockquote");
        block(token.tokens, node, depth + 1, citations);
        parent.append(node);
        break;
      }
      case "list": {
        const node = el(token.ordered ? "ol" : "ul");
        if (token.ordered && Number.isInteger(token.start) && token.start !== 1) {
          node.start = token.start;
        }
        for (const item of token.items) {
          const li = el("li");
          if (item.task) {
            const box = el("input");
            box.type = "checkbox";
            box.checked = Boolean(item.checked);
            box.disabled = true;
            li.append(box, " ");
          }
          block(item.tokens, li, depth + 1, citations);
          node.append(li);
        }
        parent.append(node);
        break;
      }
      case "table": {
        const wrap = el("div", "table-wrap");
        wrap.tabIndex = 0;
        const table = el("table");
        const head = el("thead");
        const row = el("tr");
        token.header.forEach((cell, index) => {
          const th = el("th");
          th.scope = "col";
          if (token.align[index]) th.classList.add(`align-${token.align[index]}`);
          inline(cell.tokens, th);
          row.append(th);
        });
        head.append(row);
        const body = el("tbody");
        for (const cells of token.rows) {
          const tr = el("tr");
          cells.forEach((cell, index) => {
            const td = el("td");
            if (token.align[index]) td.classList.add(`align-${token.align[index]}`);
            inline(cell.tokens, td);
            tr.append(td);
          });
          body.append(tr);
        }
        table.append(head, body);
        wrap.append(table);
        parent.append(wrap);
        break;
      }
      case "hr":
        parent.append(el("hr"));
        break;
      case "html":
      default: {
        // Raw HTML (and anything unknown) is shown as the text it is.
        const node = el("p", "raw");
        node.textContent = token.raw ?? token.text ?? "";
        parent.append(node);
      }
    }
  }
}

/**
 * A fragment holding `text` rendered as Markdown. Never parses HTML. `citations` ({href,
 * title} by number, from the answer's source list) turn "[n]" into links.
 */
export function renderMarkdown(text, citations = []) {
  const fragment = document.createDocumentFragment();
  let tokens;
  try {
    tokens = lexer(text, { gfm: true, breaks: false });
  } catch {
    const node = el("p");
    node.textContent = text;
    fragment.append(node);
    return fragment;
  }
  block(tokens, fragment, 0, citations);
  return fragment;
}
