// The Memory panel: the facts the agent keeps across sessions (GET /v1/memory), each with
// a Forget button (DELETE /v1/memory/{id}); a forgotten fact is never found again.
import { api, errorText } from "./api.js";

const $ = (id) => document.getElementById(id);
const when = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });

export async function showMemory() {
  const panel = $("memory");
  if (!panel.hidden) { panel.hidden = true; return; }
  panel.hidden = false;
  await listFacts();
}

async function listFacts() {
  const list = $("fact-list");
  list.replaceChildren();
  const response = await api("GET", "/v1/memory");
  if (!response.ok) { list.append(item(await errorText(response))); return; }
  const facts = (await response.json()).facts;
  if (!facts.length) list.append(item("Nothing remembered yet."));
  for (const fact of facts) {
    const li = item("");
    li.dataset.testid = "fact";
    const text = document.createElement("span");
    text.className = "title";
    text.textContent = fact.text;
    const meta = document.createElement("span");
    meta.className = "meta";
    meta.textContent = `remembered ${when.format(new Date(fact.at * 1000))}`
      + (fact.expires ? ` · until ${when.format(new Date(fact.expires * 1000))}` : "");
    const forget = document.createElement("button");
    forget.type = "button";
    forget.textContent = "Forget";
    forget.dataset.testid = "forget";
    forget.addEventListener("click", async () => {
      const gone = await api("DELETE", `/v1/memory/${encodeURIComponent(fact.id)}`);
      if (gone.ok || gone.status === 404) await listFacts();
      else meta.textContent = await errorText(gone);
    });
    li.append(text, meta, forget);
    list.append(li);
  }
}

function item(text) {
  const li = document.createElement("li");
  li.textContent = text;
  return li;
}
