// The session's artifacts (files its code wrote to /out) after a turn: images inline,
// the other files as download links. Each is fetched with the token, as a data: URL
// (the page's CSP admits data: images, not blob:); one already on the page is not added again.
import { api } from "./api.js";

function dataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

function size(bytes) {
  return bytes < 1024 ? `${bytes} B` : bytes < 1 << 20 ? `${(bytes / 1024).toFixed(1)} KB` : `${(bytes / 2 ** 20).toFixed(1)} MB`;
}

export async function showArtifacts(session, log) {
  const base = `/v1/sessions/${encodeURIComponent(session)}/artifacts`;
  const response = await api("GET", base);
  if (!response.ok) return;
  const { artifacts } = await response.json();
  const key = (a) => `${a.name}@${a.at}`;
  const seen = new Set([...log.querySelectorAll("[data-artifact]")].map((e) => e.dataset.artifact));
  const fresh = artifacts.filter((a) => !seen.has(key(a)));
  if (!fresh.length) return;
  const box = document.createElement("div");
  box.className = "artifacts";
  box.dataset.testid = "artifacts";
  for (const a of fresh) {
    const file = await api("GET", `${base}/${encodeURIComponent(a.name)}`);
    if (!file.ok) continue;
    const url = await dataUrl(await file.blob());
    const item = document.createElement(a.content_type.startsWith("image/") ? "img" : "a");
    item.dataset.artifact = key(a);
    if (item instanceof HTMLImageElement) {
      item.src = url;
      item.alt = item.title = a.name;
      item.dataset.testid = "artifact-image";
    } else {
      item.href = url;
      item.download = a.name;
      item.textContent = `${a.name} (${size(a.size)})`;
      item.dataset.testid = "artifact-link";
    }
    box.append(item);
  }
  log.append(box);
  box.scrollIntoView({ block: "end" });
}
