// Sub-agents and plans on the page: a nested run's steps go into a collapsible block
// under the step that started it, and a plan is a checklist that fills in as steps end.

// The block of run `run` (created on its first event, inside its parent run's block).
function runBlock(log, event) {
  const found = log.querySelector(`details.subrun[data-run="${CSS.escape(event.run)}"]`);
  if (found) return found;
  const parentRun = event.run.includes("/") ? event.run.slice(0, event.run.lastIndexOf("/")) : "";
  const parent = parentRun ? runBlock(log, { run: parentRun, agent: event.agent.slice(0, event.agent.lastIndexOf("/")) }) : log;
  const block = document.createElement("details");
  block.className = "subrun";
  block.dataset.run = event.run;
  block.dataset.testid = "subrun";
  block.open = true;
  const summary = document.createElement("summary");
  summary.textContent = event.agent.split("/").slice(1).join(" › ");
  block.append(summary);
  parent.append(block);
  return block;
}

// Whether run `run` already has its block: its first user event is its task, later ones are replies.
export function hasRun(log, run) {
  return log.querySelector(`details.subrun[data-run="${CSS.escape(run)}"]`) !== null;
}

// Move what was just rendered for `event` (everything after `mark` in the log) into its run's block.
export function nest(log, event, mark) {
  if (!event.run) return;
  const block = runBlock(log, event);
  let node = mark ? mark.nextElementSibling : log.firstElementChild;
  while (node) {
    const next = node.nextElementSibling;
    if (node !== block && !node.contains(block)) block.append(node);
    node = next;
  }
}

const MARKS = { pending: "☐", done: "☑", failed: "☒", skipped: "–" };

// A plan event: (re)draw the turn's checklist; a step's observation or the answer updates it.
export function showPlan(log, event) {
  if (event.decision === "continue") return;
  let list = log.querySelector(`ol.plan[data-turn="${event.turn}"]`);
  if (!list) {
    list = document.createElement("ol");
    list.className = "plan";
    list.dataset.turn = String(event.turn);
    list.dataset.testid = "plan";
    log.append(list);
  }
  list.dataset.version = String(event.version);
  list.replaceChildren(...event.steps.map((step, i) => planItem(step, i + 1)));
}

function planItem(step, number) {
  const li = document.createElement("li");
  li.dataset.step = String(number);
  li.dataset.status = step.status;
  li.dataset.testid = "plan-step";
  li.textContent = `${MARKS[step.status] || "☐"} ${step.task}${step.agent ? ` (${step.agent})` : ""}`;
  if (step.result) li.title = step.result;
  return li;
}

// Keep the checklist in step with the top-level run: a step finished, or the turn answered.
export function planProgress(log, event) {
  if (event.run) return;
  const list = log.querySelector(`ol.plan[data-turn="${event.turn}"]`);
  if (!list) return;
  if (event.type === "observation" && event.call_id.startsWith("step-")) {
    const item = list.querySelector(`li[data-step="${event.call_id.slice(5)}"]`);
    if (!item) return;
    const status = event.is_error ? "failed" : "done";
    item.dataset.status = status;
    item.textContent = `${MARKS[status]} ${item.textContent.slice(2)}`;
    item.title = event.text;
  } else if (event.type === "answer") {
    for (const item of list.querySelectorAll('li[data-status="pending"]')) {
      item.dataset.status = "skipped";
      item.textContent = `${MARKS.skipped} ${item.textContent.slice(2)}`;
    }
  }
}
