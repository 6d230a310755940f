// Sends the in-process app's requests for a provider's fixed https hosts (api.etsy.com,
// login.coinbase.com, ...) to local stand-ins (test/support/fake-provider.ts), path and query unchanged,
// by wrapping the global fetch that arctic, oauth4webapi and the catalog call. A rerouted request
// carries `x-routed-from-host: <the host svc called>`, so a test can tell which host was meant.
// Requests to any other host go through untouched. Returns the function that puts the original back.

export function routeHosts(routes: Record<string, string>): () => void {
  const original = globalThis.fetch;
  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const target = url.protocol === 'https:' ? routes[url.host] : undefined;
    if (!target) return original(input, init);
    const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.arrayBuffer();
    const headers = new Headers(request.headers);
    headers.set('x-routed-from-host', url.host);
    return original(new URL(`${url.pathname}${url.search}`, target), { method: request.method, headers, body, redirect: request.redirect, signal: request.signal });
  };
  return () => {
    globalThis.fetch = original;
  };
}
