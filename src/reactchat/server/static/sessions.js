// The list of past sessions (GET /v1/sessions), newest first; a click reopens one.
import { api, errorText } from "./api.js";

const $ = (id) => document.getElementById(id);
const when = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const number = new Intl.NumberFormat("en");

export async function showSessions(current, onOpen) {
  const panel = $("sessions");
  if (!panel.hidden) { panel.hidden = true; return; }
  const list = $("session-list");
  list.replaceChildren();
  panel.hidden = false;
  const response = await api("GET", "/v1/sessions?limit=50");
  if (!response.ok) {
    list.append(item(await errorText(response)));
    return;
  }
  // sessions opened and left empty ("New chat" then nothing, the current one included) are not worth a line
  const sessions = (await response.json()).sessions.filter((s) => s.turns);
  if (!sessions.length) list.append(item("No sessions yet."));
  for (const s of sessions) {
    const li = item("");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "session";
    button.dataset.testid = "session";
    if (s.session === current) button.setAttribute("aria-current", "true");
    const title = document.createElement("span");
    title.className = "title";
    title.textContent = s.question || "(no question yet)";
    const meta = document.createElement("span");
    meta.className = "meta";
    const tokens = s.usage.input_tokens + s.usage.output_tokens;
    const started = s.started ? when.format(new Date(s.started * 1000)) : "";
    meta.textContent = [started, s.status, `${s.turns} turn${s.turns === 1 ? "" : "s"}`,
      `${number.format(tokens)} tokens`].filter(Boolean).join(" · ");
    button.append(title, meta);
    button.addEventListener("click", () => { panel.hidden = true; onOpen(s.session); });
    li.append(button);
    list.append(li);
  }
}

function item(text) {
  const li = document.createElement("li");
  li.textContent = text;
  return li;
}
