// The reactchat web page: plain JS modules, no build step.
// Talks to /v1/sessions; the session id lives in localStorage so a reload resumes the chat.
import { callLine, cite, markdown, sourcesOf, usageLine } from "./render.js";
import { api, errorText, askToken, headers } from "./api.js";
import { showArtifacts } from "./artifacts.js";
import { showMemory } from "./memory.js";
import { showSessions } from "./sessions.js";
import { hasRun, nest, planProgress, showPlan } from "./team.js";
import { answerActions, dropFiles, forPeople, userActions, welcome } from "./people.js";

const $ = (id) => document.getElementById(id);
const KEY = "reactchat.session";
let session = localStorage.getItem(KEY);
let replyTo = null;   // call_id of the question the next message answers
let busy = false;
// the turn being shown: the passages its tools returned, for the answer's citations
let turn = { index: 0, sources: [], question: "" };

function setStatus(text) { $("status").textContent = text; }

function add(cls, text, testid) {
  const div = document.createElement("div");
  div.className = `msg ${cls}`;
  div.textContent = text;
  if (testid) div.dataset.testid = testid;
  $("log").append(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function step(title, body) {
  const details = document.createElement("details");
  details.className = "step";
  details.dataset.testid = "step";
  const summary = document.createElement("summary");
  summary.textContent = title;
  const pre = document.createElement("pre");
  pre.textContent = body;
  details.append(summary, pre);
  $("log").append(details);
  details.scrollIntoView({ block: "end" });
}

// A streaming model's text as it comes; the step it becomes replaces it.
function live(text) {
  let pre = $("live");
  if (!pre) {
    pre = document.createElement("pre");
    pre.id = "live";
    pre.className = "live";
    pre.dataset.testid = "live";
    $("log").append(pre);
  }
  pre.textContent += text;
  pre.scrollIntoView({ block: "end" });
}

function answer(event) {
  const div = document.createElement("div");
  div.className = "msg answer";
  div.dataset.testid = "answer";
  div.append(markdown(event.text));
  const footnotes = cite(div, turn.sources);
  if (footnotes) div.append(footnotes);
  $("log").append(div);
  const asked = turn.question;
  const index = turn.index;
  answerActions(div, event.text, asked ? () => { if (!busy) forkAndSend(index, asked); } : null);
  regenerateEnabled();
  div.scrollIntoView({ block: "end" });
}

// Edit: the message goes back to the composer; sending it forks the session before it.
let editing = null;  // the index of the turn whose message is being edited
function edit(index, text) {
  editing = index;
  $("input").value = text;
  $("input").focus();
  setStatus("Editing a past message: sending it starts a copy of the chat from there.");
}

// Edit and Regenerate: a copy of the session up to turn `index`'s message (POST /fork),
// opened, and `text` sent to it; the original session stays in Sessions as it was.
async function forkAndSend(index, text) {
  editing = null;
  const response = await api("GET", `/v1/sessions/${encodeURIComponent(session)}`);
  if (!response.ok) return setStatus(await errorText(response));
  const found = (await response.json()).turns.find((t) => t.turn === index);
  const user = found && found.events.find((e) => e.type === "user" && !e.run && !e.step);
  if (!user) return setStatus("That message is no longer in this session.");
  const fork = await api("POST", `/v1/sessions/${encodeURIComponent(session)}/fork`, { before: user.seq });
  if (!fork.ok) return setStatus(await errorText(fork));
  open((await fork.json()).session);
  await load();
  send(text);
}

function firstLine(text) { return text.split("\n")[0]; }

// A reply that could not be read: what the model wrote is the first thing to look at.
function formatError(event) {
  const raw = event.raw.split(/\s+/).join(" ").trim();
  const shown = raw.length > 200 ? `${raw.slice(0, 199)}…` : raw;
  const title = `Format error, correction sent${shown ? ` — the model wrote: ${shown}` : ""}`;
  step(title, `${event.message}${event.raw ? `\n\nThe model wrote:\n${event.raw}` : ""}`);
}

// One stored or streamed event on the page.
function show(event) {
  const pending = $("live");
  if (pending) pending.remove();
  if (event.turn !== turn.index) turn = { index: event.turn, sources: [], question: "" };
  const mark = $("log").lastElementChild;  // what follows it is this event's: nest() moves it
  switch (event.type) {
    case "user":
      if (event.run && !hasRun($("log"), event.run)) step(`Task: ${firstLine(event.text)}`, event.text);  // a sub-agent's
      else {
        const div = add("user", event.text, "user");
        const index = turn.index;
        if (!event.step) { turn.question = event.text; userActions(div, event.text, (text) => edit(index, text)); }
      }
      break;
    case "plan": showPlan($("log"), event); break;
    case "thought": if (event.text) step(`Thought: ${firstLine(event.text)}`, event.text); break;
    case "action": {
      const input = typeof event.input === "string" ? event.input : JSON.stringify(event.input, null, 2);
      if (event.tool !== "ask_user") step(`Action: ${callLine(event.tool, event.input)}`, input);
      break;
    }
    case "observation":
      if (event.tool === "ask_user") break;
      turn.sources.push(...sourcesOf(event.text));
      step(`Observation${event.is_error ? " (error)" : ""}: ${event.tool} → ${firstLine(forPeople(event.text))}`, forPeople(event.text));
      break;
    case "question": add("question", event.question, "question"); break;
    case "answer":
      if (event.thought) step(`Thought: ${firstLine(event.thought)}`, event.thought);
      if (event.run) { step(`Answer: ${firstLine(event.text)}`, event.text); break; }  // a sub-agent's
      if (event.status === "cancelled") { add("note", "Stopped: the turn was cancelled.", "note"); break; }
      answer(event);
      if (event.status === "stopped") add("note", `The agent was stopped (${event.reason}): this is its best answer so far.`, "note");
      break;
    case "compaction":  // a summary later prompts carry instead of what it covers (expandable)
      step(event.covers === "turns" ? `Earlier turns summarised (1–${event.through_turn})`
        : `Earlier steps summarised (1–${event.through_step})`, event.summary);
      break;
    case "link_skipped":  // a link of the message not read before the turn
      add("note", `The link ${event.url} was not read: ${event.reason}`, "link-skipped");
      break;
    case "error":
      if (event.kind === "format" || event.kind === "output") formatError(event);
      else add("error", event.message, "error");
      break;
  }
  nest($("log"), event, mark);
  planProgress($("log"), event);
}

// A turn that waited for the user ran in several requests, and the end of a stream counts
// only its own: the whole turn's usage comes from the session, as after a reload.
async function turnUsage(fallback) {
  const response = await api("GET", `/v1/sessions/${encodeURIComponent(session)}`).catch(() => null);
  const view = response && response.ok ? await response.json() : null;
  showUsage(view && view.turns.length ? view.turns.at(-1).usage : fallback);
}

// Tokens, time and cost of a finished turn, under its answer.
function showUsage(usage) {
  const line = usageLine(usage);
  if (!line) return;
  const div = add("usage", line, "turn-usage");
  div.title = usage.unpriced && usage.unpriced.length ? `not in the price table: ${usage.unpriced.join(", ")}` : "";
}

// What the session waits for: a question, a tool call that needs a yes (kind "approval":
// Approve sends "yes", Refuse sends "no" with the composer's text as the reason), or a call
// a crash left in doubt (kind "in_doubt": Retry runs it again, Skip records it as not run,
// and a typed reply is its result), or more budget (kind "budget": Grant sends "yes").
const CHOICES = {
  approval: [["Approve", () => "yes"], ["Refuse", () => {
    const why = $("input").value.trim();
    $("input").value = "";
    return why ? `no, ${why}` : "no";
  }]],
  in_doubt: [["Retry", () => "retry"], ["Skip", () => "skip"]],
  budget: [["Grant", () => "yes"], ["Stop", () => "no"]],
};
const PLACEHOLDERS = {
  approval: "A reason to refuse, or the arguments as JSON…",
  in_doubt: "Or say what the call did…",
  budget: "Your answer…",
};

function setPending(pending) {
  replyTo = pending ? pending.reply_to : null;
  const box = $("pending");
  const choices = (pending && CHOICES[pending.kind]) || [];
  box.hidden = !pending;
  box.replaceChildren();
  if (pending) {
    const text = document.createElement("span");
    text.textContent = pending.kind === "question" ? `The agent asks: ${pending.question}` : pending.question;
    box.append(text);
  }
  for (const [label, reply] of choices) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = label;
    button.dataset.testid = label.toLowerCase();
    button.addEventListener("click", () => { if (!busy) send(reply()); });
    box.append(button);
  }
  $("input").placeholder = (pending && PLACEHOLDERS[pending.kind]) || (pending ? "Your answer…" : "Ask something…");
}

function setBusy(value) {
  busy = value;
  $("send").hidden = value;
  $("stop").hidden = !value;
  $("stop").disabled = false;
  regenerateEnabled();
}

// Regenerate waits for the running turn to end: greyed out until then, not a click lost.
function regenerateEnabled() {
  for (const b of document.querySelectorAll("[data-testid=regenerate]")) b.disabled = busy;
}

function showFiles(files) {
  const list = $("files");
  list.replaceChildren();
  for (const file of files) {
    const li = document.createElement("li");
    const rounds = file.rounds_left === 1 ? "1 round left" : `${file.rounds_left} rounds left`;
    li.textContent = `${file.name} · ${rounds}`;
    list.append(li);
  }
}

async function newSession() {
  const response = await api("POST", "/v1/sessions");
  open((await response.json()).session);
  $("log").replaceChildren();
  setPending(null);
  showFiles([]);
  setStatus("");
  await load();  // the first view: what the agent can do
}

function open(id) {
  session = id;
  localStorage.setItem(KEY, session);
  turn = { index: 0, sources: [], question: "" };
}

const STATUS = {
  running: "The agent is working…",
  interrupted: "The last turn was interrupted; send a message to continue.",
  cancelled: "The last turn was stopped.",
};

// Rebuild the page from the stored session; follows a turn that is still running.
async function load() {
  if (!session) return newSession();
  const response = await api("GET", `/v1/sessions/${encodeURIComponent(session)}`);
  if (response.status === 404) return newSession();
  if (!response.ok) return setStatus(await errorText(response));
  const view = await response.json();
  $("log").replaceChildren();
  turn = { index: 0, sources: [], question: "" };
  if (!view.turns.length) welcome($("log"), view, (prompt) => { if (!busy) send(prompt); });
  for (const t of view.turns) {
    for (const event of t.events) show(event);
    if (t.status !== "waiting" && !(view.status === "running" && t === view.turns.at(-1))) showUsage(t.usage);
  }
  await showArtifacts(session, $("log"));
  setPending(view.pending);
  showFiles(view.files);
  $("files-bar").hidden = !view.files_enabled;
  setStatus(STATUS[view.status] || "");
  setBusy(view.status === "running");
  if (view.status === "running") setTimeout(() => { if (!sending) load(); }, 1000);
}

let sending = false;
// the names of the images uploaded for the next message
const images = [];

// POST a message and render its SSE events as they arrive. If the stream breaks before
// its end (a worker died, the network dropped), follow the session from the last event
// seen (Last-Event-ID): the server that takes the turn over sends the rest, once each.
async function send(text) {
  const first = document.querySelector("[data-testid=welcome]");
  if (first) first.remove();
  sending = true;
  setBusy(true);
  setStatus(STATUS.running);
  const body = { message: text };
  if (replyTo) body.reply_to = replyTo;
  // images uploaded since the last message go with this one (a reply to a question has none)
  if (images.length && !replyTo) body.images = images.splice(0);
  setPending(null);
  const stream = { lastId: null, ended: false };
  try {
    const response = await api("POST", `/v1/sessions/${encodeURIComponent(session)}/messages`, body);
    if (!response.ok) {
      add("error", await errorText(response), "error");
      if (response.status === 409) await load();
      return;
    }
    await readStream(response, stream).catch(() => {});
    for (let attempt = 1; !stream.ended && stream.lastId !== null && attempt <= 10; attempt++) {
      setStatus("Connection lost; reconnecting…");
      await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
      const follow = await api("GET", `/v1/sessions/${encodeURIComponent(session)}/events`, null, {
        headers: headers({ "Last-Event-ID": String(stream.lastId) }),
      }).catch(() => null);
      if (follow && follow.ok) await readStream(follow, stream).catch(() => {});
    }
    if (!stream.ended) add("error", "Connection lost. Reload to see where the agent is.", "error");
    else if (stream.usage) await turnUsage(stream.usage);
  } catch (error) {
    add("error", `Connection lost: ${error}. Reload to see where the agent is.`, "error");
  } finally {
    sending = false;
    setBusy(false);
  }
}

// Render an SSE response's frames; `stream` keeps the last event id and whether `end` came.
async function readStream(response, stream) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      frame(buffer.slice(0, cut), stream);
      buffer = buffer.slice(cut + 2);
    }
  }
}

function frame(block, stream) {
  let kind = "message";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) kind = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
    else if (line.startsWith("id: ")) stream.lastId = Number(line.slice(4));
  }
  if (!data) return;  // a keepalive comment
  const payload = JSON.parse(data);
  if (kind === "delta") return live(payload.text);
  if (kind !== "end") return show(payload);
  stream.ended = true;
  const pending = $("live");
  if (pending) pending.remove();
  setStatus(payload.status === "interrupted" ? "The turn was interrupted; send a message to continue."
    : payload.status === "cancelled" ? STATUS.cancelled : "");
  setPending(payload.status === "waiting" ? payload.pending : null);
  // the run records a cancelled turn after its stream was cut: the note comes from here
  if (payload.status === "cancelled") add("note", "Stopped: the turn was cancelled.", "note");
  if (payload.status !== "waiting") stream.usage = payload.usage;  // shown once the stream is over
  if (payload.files) showFiles(payload.files);
  showArtifacts(session, $("log"));
}

async function stop() {
  $("stop").disabled = true;
  setStatus("Stopping…");
  const response = await api("POST", `/v1/sessions/${encodeURIComponent(session)}/cancel`);
  if (!response.ok) {
    setStatus(await errorText(response));
    $("stop").disabled = false;
  } else if (!sending) {
    await load();
  }
}

// Upload with a progress bar: the first half is the upload itself, the second half the
// server reading the file (SSE "progress" events: pages, then passages).
function upload(file) {
  const form = new FormData();
  form.append("file", file);
  const xhr = new XMLHttpRequest();
  const bar = $("progress");
  const note = $("upload-note");
  let seen = 0;
  let finished = false;
  xhr.open("POST", `/v1/sessions/${encodeURIComponent(session)}/files`);
  xhr.setRequestHeader("Accept", "text/event-stream");
  for (const [name, value] of Object.entries(headers())) xhr.setRequestHeader(name, value);
  bar.hidden = false;
  bar.value = 0;
  note.textContent = `Uploading ${file.name}…`;
  xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = (50 * e.loaded) / e.total; };
  xhr.upload.onload = () => { bar.value = 50; note.textContent = `Reading ${file.name}…`; };
  const onFrame = (kind, data) => {
    if (kind === "progress" && data.total) bar.value = 50 + (50 * data.done) / data.total;
    if (kind === "error") { finished = true; note.textContent = data.message; }
    if (kind === "file") {
      finished = true;
      bar.value = 100;
      if (data.file.image) {
        images.push(data.file.name);
        note.textContent = `${data.file.name}: goes with your next message`;
      } else {
        // the rounds left are on the file's chip, which counts down: the note stays true
        note.textContent = `${data.file.name}: read, ${data.file.chunks} passages`;
      }
      showFiles(data.files);
    }
  };
  const readFrames = () => {
    const text = xhr.responseText;
    let cut;
    while ((cut = text.indexOf("\n\n", seen)) >= 0) {
      const block = text.slice(seen, cut);
      seen = cut + 2;
      const kind = (block.match(/^event: (.*)$/m) || [])[1];
      const data = (block.match(/^data: (.*)$/m) || [])[1];
      if (kind && data) onFrame(kind, JSON.parse(data));
    }
  };
  xhr.onprogress = () => { if (xhr.status === 200) readFrames(); };
  xhr.onload = async () => {
    if (xhr.status === 401) { await askToken(); return upload(file); }
    if (xhr.status === 200) readFrames();
    else {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch { /* not JSON: reported below */ }
      note.textContent = body.error ? body.error.message : `Upload failed (HTTP ${xhr.status})`;
    }
    if (xhr.status === 200 && !finished) note.textContent = "Upload failed: the server stopped before the end.";
    setTimeout(() => { bar.hidden = true; }, 800);
  };
  xhr.onerror = () => { note.textContent = "Upload failed: the connection was lost."; bar.hidden = true; };
  xhr.send(form);
}

$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || busy) return;
  $("input").value = "";
  await ready;  // the first load may still be creating the session
  if (editing !== null) forkAndSend(editing, text);
  else send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
});
$("stop").addEventListener("click", () => stop());
$("pick").addEventListener("click", () => $("file").click());
dropFiles(async (file) => { await ready; upload(file); });
$("file").addEventListener("change", async () => {
  const file = $("file").files[0];
  $("file").value = "";
  await ready;
  if (file) upload(file);
});
$("clear").addEventListener("click", async () => {
  const response = await api("DELETE", `/v1/sessions/${encodeURIComponent(session)}/context`);
  if (!response.ok) return setStatus(await errorText(response));
  showFiles([]);
  $("upload-note").textContent = "";
  add("note", "Context cleared: the uploaded files are forgotten.", "note");
});
$("new").addEventListener("click", () => { ready = newSession(); });
$("memory-button").addEventListener("click", showMemory);
$("history").addEventListener("click", () => showSessions(session, (id) => { open(id); ready = load(); }));

// what a message or an upload waits for: the session being created or opened
let ready = load();
