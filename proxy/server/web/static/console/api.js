// The only place that talks to the server. The API key lives in sessionStorage (this tab
// only, gone when it closes), goes out only in the Authorization header, and fetches
// never send cookies.

const KEY = "dpsql.apiKey";

export class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "internal";
    this.hint = error.hint || "";
    this.details = error;
  }
}

export const session = {
  key: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

let onUnauthorized = () => {};
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = session.key();
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers, credentials: "omit", cache: "no-store", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, { code: "network", message: "the server cannot be reached", hint: "is dpsql still running?" });
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new ApiError(response.status, (data && data.error) || { message: response.statusText });
    if (response.status === 401) onUnauthorized(error);
    throw error;
  }
  return data;
}
