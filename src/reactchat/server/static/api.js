// Requests to the reactchat API, with the access token when the server needs one.
const TOKEN = "reactchat.token";
const $ = (id) => document.getElementById(id);

export function headers(extra = {}) {
  const token = localStorage.getItem(TOKEN);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

export async function askToken() {
  const dialog = $("token-dialog");
  dialog.showModal();
  await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
  localStorage.setItem(TOKEN, $("token").value.trim());
}

// fetch with the token; a 401 asks for the token and tries again
export async function api(method, path, body, options = {}) {
  for (;;) {
    const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}), ...options };
    if (body) init.body = JSON.stringify(body);
    const response = await fetch(path, init);
    if (response.status !== 401) return response;
    await askToken();
  }
}

export async function errorText(response) {
  try { return (await response.json()).error.message; } catch { return `HTTP ${response.status}`; }
}
