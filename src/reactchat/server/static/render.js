// How the page shows an answer, its citations, a step line and a turn's usage.
// Markdown goes through marked (raw HTML in it is shown as text) and then DOMPurify;
// nothing the model wrote reaches innerHTML unsanitised.
"use strict";

const { marked, DOMPurify } = window;

marked.use({
  gfm: true,
  breaks: true,
  // the model's raw HTML is text to show, not markup to run
  renderer: { html: ({ text }) => escapeHtml(text) },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img"],
  FORBID_ATTR: ["style", "class", "id"],
};

export function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// The answer as sanitised HTML, in a fragment ready to append.
export function markdown(text) {
  return DOMPurify.sanitize(marked.parse(text), PURIFY);
}

// Passages a tool returned with a citation each: "[n] head" lines, each followed by its
// text (search_files: "[1] notes.md · lines 3-5"; web_search: "[2] Title · https://…").
export function sourcesOf(observation) {
  const sources = [];
  let current = null;
  for (const line of observation.split("\n")) {
    const head = line.match(/^\[(\d{1,3})\]\s+(.+)$/);
    if (head) {
      current = { n: Number(head[1]), head: head[2].trim(), text: "", url: firstUrl(head[2]) };
      sources.push(current);
    } else if (current) {
      current.text += (current.text ? "\n" : "") + line;
      current.url = current.url || firstUrl(line);
    }
  }
  return sources;
}

function firstUrl(text) {
  const found = text.match(/https?:\/\/[^\s<>"')\]]+/);
  return found ? found[0] : null;
}

const squash = (text) => text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "");

// The source a citation key points at: "2" (the latest search that had a [2]) or a
// head such as "notes.md · lines 3-5" (matched without spaces, punctuation or case).
function lookup(key, sources) {
  if (/^\d{1,3}$/.test(key)) {
    const n = Number(key);
    for (let i = sources.length - 1; i >= 0; i--) if (sources[i].n === n) return sources[i];
    return null;
  }
  const wanted = squash(key);
  if (wanted.length < 3) return null;
  return sources.find((s) => squash(s.head) === wanted)
    || sources.find((s) => squash(s.head).includes(wanted) || wanted.includes(squash(s.head)))
    || null;
}

// Citations in the rendered answer ("[1]", "[1, 2]", "[notes.md · lines 3-5]") become
// numbered footnote links; returns the footnotes list (or null when nothing was cited).
export function cite(container, sources) {
  if (!sources.length) return null;
  const cited = [];
  const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.parentElement.closest("code, pre, a") && node.nodeValue.includes("[")) nodes.push(node);
  }
  for (const node of nodes) {
    const pieces = node.nodeValue.split(/(\[[^[\]\n]{1,200}\])/);
    if (pieces.length === 1) continue;
    const out = document.createDocumentFragment();
    let changed = false;
    for (const piece of pieces) {
      const keys = piece.startsWith("[") && piece.endsWith("]") ? piece.slice(1, -1).split(/\s*[,;]\s*/) : null;
      const found = keys && keys.map((k) => lookup(k.trim(), sources));
      if (!found || found.some((s) => s === null)) {
        out.append(piece);
        continue;
      }
      changed = true;
      for (const source of found) {
        if (!cited.includes(source)) cited.push(source);
        out.append(marker(cited.indexOf(source) + 1));
      }
    }
    if (changed) node.replaceWith(out);
  }
  if (!cited.length) return null;
  const list = document.createElement("ol");
  list.className = "footnotes";
  list.dataset.testid = "footnotes";
  cited.forEach((source, i) => list.append(footnote(source, i + 1)));
  container.addEventListener("click", (e) => {
    const link = e.target.closest("a.cite");
    if (!link) return;
    e.preventDefault();
    const item = list.children[Number(link.dataset.n) - 1];
    const details = item.querySelector("details");
    details.open = true;
    details.scrollIntoView({ block: "nearest" });
  });
  return list;
}

function marker(n) {
  const link = document.createElement("a");
  link.className = "cite";
  link.href = "#";
  link.dataset.n = String(n);
  link.dataset.testid = "cite";
  const sup = document.createElement("sup");
  sup.textContent = `[${n}]`;
  link.append(sup);
  return link;
}

function footnote(source, n) {
  const item = document.createElement("li");
  item.value = n;
  const details = document.createElement("details");
  details.dataset.testid = "source";
  const summary = document.createElement("summary");
  summary.textContent = source.head;
  const passage = document.createElement("blockquote");
  passage.textContent = source.text.trim() || "(no passage text)";
  details.append(summary, passage);
  if (source.url) {
    const link = document.createElement("a");
    link.href = source.url;
    link.target = "_blank";
    link.rel = "noopener noreferrer nofollow";
    link.textContent = source.url;
    details.append(link);
  }
  item.append(details);
  return item;
}

// "calculator(expression="80.16 * 1.15")": the call as one readable line.
export function callLine(tool, input, max = 160) {
  let args;
  if (typeof input === "string") args = JSON.stringify(input);
  else args = Object.entries(input || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
  const line = `${tool}(${args})`;
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

const number = new Intl.NumberFormat("en");

// "2 model calls · 812 tokens (640 in, 172 out) · 1.4 s · $0.0004"
export function usageLine(usage) {
  if (!usage || !usage.calls) return "";
  const tokens = usage.input_tokens + usage.output_tokens;
  const approx = usage.estimated ? "≈" : "";
  const parts = [
    `${usage.calls} model call${usage.calls === 1 ? "" : "s"}`,
    `${approx}${number.format(tokens)} tokens (${number.format(usage.input_tokens)} in, ${number.format(usage.output_tokens)} out${usage.estimated ? ", estimated" : ""})`,
    `${usage.seconds.toFixed(1)} s`,
    cost(usage.cost),
  ];
  return parts.join(" · ");
}

function cost(value) {
  if (value === null || value === undefined) return "cost unknown";
  if (value === 0) return "$0";
  return `$${value < 0.01 ? value.toPrecision(2) : value.toFixed(4)}`;
}
