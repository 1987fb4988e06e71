// What makes the page easier for people: the first view, copy buttons, edit and
// regenerate, dropping a file on the page, and observations without the model's notes.

const EXAMPLES = [
  ["calculator", "What is 80.16 plus 15%?"],
  ["search_files", "Summarise the file I uploaded."],
  ["fetch_url", "What does https://example.com say?"],
];

// The empty chat's first view: what the agent can do and a few prompts to click.
export function welcome(log, view, onPick) {
  const box = document.createElement("section");
  box.className = "welcome";
  box.dataset.testid = "welcome";
  const title = document.createElement("h2");
  title.textContent = "What this agent can do";
  const list = document.createElement("ul");
  list.className = "tools";
  const names = view.tools.map((t) => t.name);
  for (const tool of view.tools) {
    const li = document.createElement("li");
    li.textContent = `${tool.name}: ${tool.description.split(/(?<=\.)\s/)[0]}`;
    list.append(li);
  }
  const reads = [view.files_enabled && "files you upload (button or drop)", names.includes("fetch_url") && "links in your messages"].filter(Boolean);
  const note = document.createElement("p");
  note.textContent = reads.length ? `It reads ${reads.join(" and ")}.` : "";
  const examples = document.createElement("div");
  examples.className = "examples";
  for (const [tool, prompt] of EXAMPLES) {
    if (!names.includes(tool) && !(tool === "search_files" && view.files_enabled)) continue;
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.testid = "example";
    button.textContent = prompt;
    button.addEventListener("click", () => onPick(prompt));
    examples.append(button);
  }
  box.append(title, list, note, examples);
  log.append(box);
}

function button(label, testid, title, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.dataset.testid = testid;
  b.title = title;
  b.addEventListener("click", onClick);
  return b;
}

async function copy(text, b) {
  await navigator.clipboard.writeText(text);
  b.dataset.done = "true";
  setTimeout(() => { delete b.dataset.done; }, 1500);
}

// Copy on an answer (its Markdown source) and on each of its code blocks; Regenerate.
// The bar goes after the answer, and a code block's button is drawn by CSS, so neither
// is part of the answer's text.
export function answerActions(div, text, onRegenerate) {
  for (const pre of div.querySelectorAll("pre")) {
    const code = pre.textContent;
    const b = button("", "copy-code", "Copy this code", () => copy(code, b));
    b.className = "copy";
    b.setAttribute("aria-label", "Copy this code");
    pre.append(b);
  }
  const bar = document.createElement("div");
  bar.className = "actions";
  const c = button("Copy", "copy", "Copy the answer", () => copy(text, c));
  bar.append(c);
  if (onRegenerate) bar.append(button("Regenerate", "regenerate", "Answer again, in a copy of the chat from this question (this one stays in Sessions)", onRegenerate));
  div.after(bar);
}

// Edit on a past message: its text goes back to the composer, to be changed and sent.
export function userActions(div, text, onEdit) {
  const bar = document.createElement("div");
  bar.className = "actions";
  bar.className = "actions mine";
  bar.append(button("Edit", "edit", "Edit and send again, in a copy of the chat from this message (this one stays in Sessions)", () => onEdit(text)));
  div.after(bar);
}

// A file dropped anywhere on the page is uploaded as the button would.
export function dropFiles(onFile) {
  const body = document.body;
  body.addEventListener("dragover", (e) => { e.preventDefault(); body.classList.add("dropping"); });
  body.addEventListener("dragleave", (e) => { if (e.target === body || !e.relatedTarget) body.classList.remove("dropping"); });
  body.addEventListener("drop", (e) => {
    e.preventDefault();
    body.classList.remove("dropping");
    const file = e.dataTransfer && e.dataTransfer.files[0];
    if (file) onFile(file);
  });
}

// What a tool found, without the note addressed to the model ("(cite them as [n]):").
export function forPeople(observation) {
  return observation.replace(/\s*\(cite them as [^)]*\)/, "");
}
