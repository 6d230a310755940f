// Where the API is. Behind the proxy: this origin (''). A dev server on another port serves its own
// config.js with the proxy's origin here (test/deploy/support/deployment.ts, startDevServer).
window.SVC_API = '';
