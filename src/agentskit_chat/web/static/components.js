// The closed set of components the page renders: the twelve standard components, each checked
// against its props schema (served by the page's own server from the Python models) before it
// is drawn. Anything else, or props that do not validate, is shown as its semantic fallback.
import { fallbackText, isSafeId } from "./protocol.js";
import { el, externalLink, safeHref } from "./markdown.js";

let catalog = null;

/** Loads the component catalog (key → props schema) once. */
export async function loadCatalog() {
  if (catalog !== null) return catalog;
  const response = await fetch("static/components.json", { credentials: "same-origin" });
  catalog = response.ok ? await response.json() : {};
  return catalog;
}

// --- a JSON Schema subset: what the props models emit, checked in full ---------------------

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function matchesType(type, value) {
  const actual = typeOf(value);
  if (type === "number") return actual === "number" || actual === "integer";
  return actual === type;
}

// The keywords `validates` checks. Annotations change nothing; anything else in a schema
// (`if`, `dependentSchemas`, `$dynamicRef`, a misspelling, ...) makes the value fail, so a
// schema the page cannot fully check never lets a frame through.
const ANNOTATIONS = new Set([
  "title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
  "writeOnly",
  // `format` is an annotation in JSON Schema 2020-12; `discriminator` (OpenAPI) only names
  // the property that `oneOf` already checks.
  "format", "discriminator",
]);
const ASSERTIONS = new Set([
  "$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "const", "enum", "type",
  "minLength", "maxLength", "pattern",
  "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
  "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
  "properties", "required", "additionalProperties", "propertyNames",
  "minProperties", "maxProperties",
]);

function knows(node) {
  return Object.keys(node).every((key) => ASSERTIONS.has(key) || ANNOTATIONS.has(key));
}

function target(ref, root) {
  if (typeof ref !== "string" || !ref.startsWith("#/$defs/")) return undefined;
  const name = ref.slice("#/$defs/".length);
  const defs = root.$defs;
  return defs && typeof defs === "object" && Object.prototype.hasOwnProperty.call(defs, name)
    ? defs[name]
    : undefined;
}

function pattern(source) {
  try {
    return new RegExp(source, "u");
  } catch {
    return null;
  }
}

// Key order does not matter to JSON equality.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function multipleOf(value, divisor) {
  if (typeof divisor !== "number" || !(divisor > 0)) return false;
  const quotient = value / divisor;
  return Number.isFinite(quotient) && Math.abs(quotient - Math.round(quotient)) < 1e-9;
}

/**
 * Whether `value` satisfies `schema`: the keywords above, checked; any other keyword, or a
 * malformed one, fails (closed).
 */
export function validates(schema, value, root = schema, depth = 0) {
  if (depth > 32) return false;
  const node = schema;
  if (!node || typeof node !== "object" || Array.isArray(node) || !knows(node)) return false;
  const next = depth + 1;
  if (node.$ref !== undefined) {
    const referenced = target(node.$ref, root);
    if (referenced === undefined || !validates(referenced, value, root, next)) return false;
  }
  for (const key of ["anyOf", "oneOf", "allOf"]) {
    if (node[key] !== undefined && (!Array.isArray(node[key]) || node[key].length === 0)) {
      return false;
    }
  }
  if (node.anyOf && !node.anyOf.some((option) => validates(option, value, root, next))) {
    return false;
  }
  if (node.oneOf && node.oneOf.filter((option) => validates(option, value, root, next)).length !== 1) {
    return false;
  }
  if (node.allOf && !node.allOf.every((option) => validates(option, value, root, next))) {
    return false;
  }
  if (node.not !== undefined && (typeof node.not !== "object" || validates(node.not, value, root, next))) {
    return false;
  }
  if ("const" in node && canonical(value) !== canonical(node.const)) return false;
  if (node.enum !== undefined) {
    if (!Array.isArray(node.enum)) return false;
    const wanted = canonical(value);
    if (!node.enum.some((option) => canonical(option) === wanted)) return false;
  }
  if (node.type !== undefined) {
    const types = Array.isArray(node.type) ? node.type : [node.type];
    if (!types.some((type) => matchesType(type, value))) return false;
  }
  if (typeof value === "string") {
    if (node.minLength !== undefined && value.length < node.minLength) return false;
    if (node.maxLength !== undefined && value.length > node.maxLength) return false;
    if (node.pattern !== undefined) {
      const regex = pattern(node.pattern);
      if (regex === null || !regex.test(value)) return false;
    }
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return false;
    if (node.minimum !== undefined && value < node.minimum) return false;
    if (node.maximum !== undefined && value > node.maximum) return false;
    if (node.exclusiveMinimum !== undefined && value <= node.exclusiveMinimum) return false;
    if (node.exclusiveMaximum !== undefined && value >= node.exclusiveMaximum) return false;
    if (node.multipleOf !== undefined && !multipleOf(value, node.multipleOf)) return false;
  }
  if (Array.isArray(value)) {
    if (node.minItems !== undefined && value.length < node.minItems) return false;
    if (node.maxItems !== undefined && value.length > node.maxItems) return false;
    let rest = value;
    if (node.prefixItems !== undefined) {
      if (!Array.isArray(node.prefixItems)) return false;
      const prefix = node.prefixItems;
      if (!value.slice(0, prefix.length).every((item, i) => validates(prefix[i], item, root, next))) {
        return false;
      }
      rest = value.slice(prefix.length);
    }
    if (node.items !== undefined && !rest.every((item) => validates(node.items, item, root, next))) {
      return false;
    }
    if (node.uniqueItems === true && new Set(value.map(canonical)).size !== value.length) {
      return false;
    }
  }
  if (typeOf(value) === "object") {
    const keys = Object.keys(value);
    if (node.maxProperties !== undefined && keys.length > node.maxProperties) return false;
    if (node.minProperties !== undefined && keys.length < node.minProperties) return false;
    if (node.required !== undefined && !Array.isArray(node.required)) return false;
    for (const key of node.required || []) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) return false;
    }
    const properties = node.properties || {};
    for (const key of keys) {
      if (node.propertyNames !== undefined && !validates(node.propertyNames, key, root, next)) {
        return false;
      }
      if (Object.prototype.hasOwnProperty.call(properties, key)) {
        if (!validates(properties[key], value[key], root, next)) return false;
      } else if (node.additionalProperties === false) {
        return false;
      } else if (typeof node.additionalProperties === "object") {
        if (!validates(node.additionalProperties, value[key], root, next)) return false;
      }
    }
  }
  return true;
}

function uniqueIds(items) {
  const ids = items.map((item) => item.id);
  return ids.every(isSafeId) && new Set(ids).size === ids.length;
}

// Rules the schemas cannot say: unique ids within a list.
const EXTRA_RULES = {
  "button-group": (props) => uniqueIds(props.buttons),
  "choice-list": (props) => uniqueIds(props.choices),
  form: (props) =>
    uniqueIds(props.fields) && props.fields.every((field) => !field.options || uniqueIds(field.options)),
  "source-list": (props) => uniqueIds(props.sources),
  table: (props) => new Set(props.columns.map((column) => column.key)).size === props.columns.length,
};

/** Whether a frame is one of the registered components with valid props. */
export function resolves(frame) {
  const entry = catalog && Object.prototype.hasOwnProperty.call(catalog, frame.componentKey)
    ? catalog[frame.componentKey]
    : null;
  if (entry === null || !validates(entry.schema, frame.props)) return false;
  const rule = EXTRA_RULES[frame.componentKey];
  return rule ? rule(frame.props) : true;
}

// --- renderers ------------------------------------------------------------------------------

function button(label, className, onClick, disabled) {
  const node = el("button", className, label);
  node.type = "button";
  node.disabled = Boolean(disabled);
  if (!disabled) node.addEventListener("click", onClick);
  return node;
}

function frameRoot(frame, tag = "section") {
  const root = el(tag, `component component-${frame.componentKey}`);
  root.dataset.component = frame.componentKey;
  root.dataset.instance = frame.instanceId;
  return root;
}

function choiceList(frame, ctx) {
  const { props } = frame;
  const root = frameRoot(frame, "fieldset");
  root.append(el("legend", null, props.prompt));
  const list = el("div", "choices");
  props.choices.forEach((choice, index) => {
    const node = button("", "choice", () => ctx.select(frame, choice), !ctx.interactive);
    node.dataset.choice = choice.id;
    const number = el("span", "choice-number", `${index + 1}`);
    number.setAttribute("aria-hidden", "true");
    const label = el("span", "choice-label", choice.label);
    node.append(number, label);
    if (choice.description) node.append(el("span", "choice-description", choice.description));
    if (choice.action) node.classList.add("choice-action");
    list.append(node);
  });
  root.append(list);
  return root;
}

function buttonGroup(frame, ctx) {
  const { props } = frame;
  const root = frameRoot(frame, "div");
  root.setAttribute("role", "group");
  root.setAttribute("aria-label", props.label);
  for (const item of props.buttons) {
    const node = button(
      item.label,
      `choice variant-${item.variant || "secondary"}`,
      () => ctx.interact(frame, "select", item.id, item.label),
      item.disabled || !ctx.interactive,
    );
    node.dataset.choice = item.id;
    root.append(node);
  }
  return root;
}

// A form's values as the server checks them: a checkbox a boolean, a number a number (or the
// text the browser could not read as one), any other field its text; empty fields left out.
function formValues(root, fields) {
  const values = {};
  for (const field of fields) {
    const input = root.elements.namedItem(field.id);
    if (field.type === "checkbox") {
      values[field.id] = input.checked;
    } else if (input.value !== "") {
      const number = field.type === "number" ? input.valueAsNumber : NaN;
      values[field.id] = Number.isFinite(number) ? number : input.value;
    }
  }
  return values;
}

// The server validates a submitted form (one rule for every interface) and its refusal names
// the field, so the browser's own checks are off; what was typed survives every re-render.
function form(frame, ctx) {
  const { props } = frame;
  const draft = ctx.draft(frame.instanceId);
  const root = frameRoot(frame, "form");
  root.noValidate = true;
  root.setAttribute("aria-label", props.title || "Form");
  if (props.title) root.append(el("h3", null, props.title));
  const fieldset = el("fieldset");
  fieldset.disabled = !ctx.interactive;
  for (const field of props.fields) {
    const id = `${frame.instanceId}-${field.id}`;
    const row = el("div", "field");
    const label = el("label", null, field.label);
    label.htmlFor = id;
    let input;
    if (field.type === "select") {
      input = el("select");
      const none = el("option", null, "Choose…");
      none.value = "";
      input.append(none);
      for (const option of field.options || []) {
        const node = el("option", null, option.label);
        node.value = option.id;
        input.append(node);
      }
    } else {
      input = el("input");
      input.type = field.type;
      if (field.placeholder) input.placeholder = field.placeholder;
    }
    input.id = id;
    input.name = field.id;
    input.required = Boolean(field.required) && field.type !== "checkbox";
    if (field.id in draft) {
      if (field.type === "checkbox") input.checked = draft[field.id];
      else input.value = draft[field.id];
    }
    if (field.type === "checkbox") row.append(input, label);
    else row.append(label, input);
    fieldset.append(row);
  }
  const submit = el("button", "primary", props.submitLabel);
  submit.type = "submit";
  fieldset.append(submit);
  root.append(fieldset);
  const remember = (event) => {
    const input = event.target;
    if (input && input.name) draft[input.name] = input.type === "checkbox" ? input.checked : input.value;
  };
  root.addEventListener("input", remember);
  root.addEventListener("change", remember);
  root.addEventListener("submit", (event) => {
    event.preventDefault();
    // What a server that does not know interactions answers instead.
    const lines = props.fields.map((field) => {
      const input = root.elements.namedItem(field.id);
      const value = field.type === "checkbox" ? (input.checked ? "yes" : "no") : input.value;
      return `${field.label}: ${value}`;
    });
    ctx.interact(frame, "submit", formValues(root, props.fields), lines.join("\n"));
  });
  return root;
}

// A confirmation or an approval request. When a tool call of the same message waits under the
// frame's instance id, the click decides that call (`payload.confirmation`); otherwise it is
// the component's own event (`payload.interaction`).
function twoButtons(frame, ctx, title, message, [yes, yesEvent], [no, noEvent]) {
  const root = frameRoot(frame, "div");
  root.setAttribute("role", "group");
  root.setAttribute("aria-label", title);
  root.append(el("h3", null, title), el("p", null, message));
  const row = el("div", "actions");
  const call = ctx.pendingCall(frame.instanceId);
  const act = (event, label, decision) => () =>
    call ? ctx.decide(call.id, decision) : ctx.interact(frame, event, undefined, label);
  row.append(
    button(yes, "primary", act(yesEvent, yes, "approve"), !ctx.interactive),
    button(no, "secondary", act(noEvent, no, "reject"), !ctx.interactive),
  );
  root.append(row);
  return root;
}

function progress(frame) {
  const { props } = frame;
  const root = frameRoot(frame, "div");
  const label = el("span", "progress-label", props.label);
  label.id = `${frame.instanceId}-label`;
  const bar = el("progress");
  bar.max = 100;
  bar.value = props.value;
  bar.setAttribute("aria-labelledby", label.id);
  const value = el("span", "progress-value", `${props.value}%`);
  root.append(label, bar, value);
  if (props.status) root.append(el("span", "progress-status", props.status));
  root.setAttribute("aria-live", "polite");
  return root;
}

function sourceList(frame) {
  const { props } = frame;
  const root = frameRoot(frame, "nav");
  root.setAttribute("aria-label", props.label);
  const heading = el("h3", "sources-label", props.label);
  heading.id = `${frame.instanceId}-label`;
  root.append(heading);
  const list = el("ol", "sources");
  list.setAttribute("aria-labelledby", heading.id);
  for (const source of props.sources) {
    const item = el("li");
    const href = source.url ? safeHref(source.url) : null;
    if (href !== null) {
      const link = el("a", null, source.title);
      externalLink(link, href);
      item.append(link);
    } else {
      item.append(el("span", null, source.title));
    }
    if (source.snippet) item.append(el("q", "snippet", source.snippet));
    list.append(item);
  }
  root.append(list);
  return root;
}

function linkCard(frame) {
  const { props } = frame;
  const root = frameRoot(frame, "div");
  const href = safeHref(props.href);
  const link = el("a", "card-link");
  if (href !== null) externalLink(link, href);
  link.append(el("strong", null, props.title));
  if (props.description) link.append(el("span", "card-description", props.description));
  if (props.label) link.append(el("span", "card-label", props.label));
  root.append(link);
  return root;
}

function errorNotice(frame, ctx) {
  const { props } = frame;
  const root = frameRoot(frame, "div");
  root.setAttribute("role", "alert");
  root.append(el("strong", null, props.title), el("p", null, props.message));
  if (props.code) root.append(el("code", "error-code", props.code));
  if (props.retryLabel) {
    root.append(button(props.retryLabel, "secondary", () => ctx.retry(), !ctx.interactive));
  }
  return root;
}

function toolCall(frame) {
  const { props } = frame;
  const root = frameRoot(frame, "div");
  root.setAttribute("role", "status");
  root.setAttribute("aria-label", `Tool ${props.name}: ${props.status}`);
  const details = el("details");
  details.append(el("summary", null, `${props.name} · ${props.status}`));
  if (props.arguments !== undefined) {
    details.append(el("pre", null, JSON.stringify(props.arguments, null, 2)));
  }
  if (props.result !== undefined) {
    details.append(el("pre", null, JSON.stringify(props.result, null, 2)));
  }
  root.append(details);
  return root;
}

function table(frame) {
  const { props } = frame;
  const root = frameRoot(frame, "div");
  root.classList.add("table-wrap");
  root.tabIndex = 0;
  const node = el("table");
  node.append(el("caption", null, props.caption));
  const head = el("thead");
  const row = el("tr");
  for (const column of props.columns) {
    const th = el("th", null, column.label);
    th.scope = "col";
    row.append(th);
  }
  head.append(row);
  const body = el("tbody");
  for (const record of props.rows) {
    const tr = el("tr");
    for (const column of props.columns) {
      const value = record[column.key];
      tr.append(el("td", null, value === undefined || value === null ? "" : String(value)));
    }
    body.append(tr);
  }
  node.append(head, body);
  root.append(node);
  return root;
}

function formatBytes(size) {
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / (1024 * 1024)).toFixed(1)} MB`;
}

function fileAttachment(frame) {
  const { props } = frame;
  const root = frameRoot(frame, "div");
  const href = props.url ? safeHref(props.url) : null;
  const name = el(href === null ? "span" : "a", "file-name", props.name);
  if (href !== null) externalLink(name, href);
  const meta = [props.mimeType];
  if (props.sizeBytes !== undefined) meta.push(formatBytes(props.sizeBytes));
  root.append(name, el("span", "file-meta", meta.join(" · ")));
  return root;
}

const RENDERERS = {
  "button-group": buttonGroup,
  "choice-list": choiceList,
  form,
  confirmation: (frame, ctx) =>
    twoButtons(frame, ctx, frame.props.title, frame.props.message, [frame.props.confirmLabel, "confirm"], [
      frame.props.cancelLabel,
      "cancel",
    ]),
  progress,
  "source-list": sourceList,
  "link-card": linkCard,
  "error-notice": errorNotice,
  "tool-call": toolCall,
  "approval-request": (frame, ctx) =>
    twoButtons(frame, ctx, frame.props.title, frame.props.description, [frame.props.approveLabel, "approve"], [
      frame.props.denyLabel,
      "deny",
    ]),
  table,
  "file-attachment": fileAttachment,
};

/** The semantic fallback of a frame, as the text every renderer shows. */
export function renderFallback(frame) {
  const node = el("p", "component-fallback", fallbackText(frame.fallback));
  node.dataset.component = frame.componentKey;
  node.dataset.fallback = "true";
  return node;
}

/**
 * A frame as an element: its renderer when it resolves, else its fallback.
 * `ctx`: {interactive, select(frame, choice), interact(frame, event, value, text),
 * decide(toolCallId, decision), pendingCall(instanceId), draft(instanceId), retry()}.
 */
export function renderFrame(frame, ctx) {
  if (!resolves(frame)) return renderFallback(frame);
  try {
    return RENDERERS[frame.componentKey](frame, ctx);
  } catch {
    return renderFallback(frame);
  }
}
