// The deployment self-check (CONTRACT 17, docs/deployment-topologies.md): what svc sees of this
// browser's requests through the proxies in front, the session cookie it sets, the frontends it
// trusts, and each finding with what to change. The same function answers `svc doctor --url`.

import { h, page, svc, table } from '../ui.ts';

export async function deploymentPage(): Promise<void> {
  const d = await svc.admin.diagnostics();
  const { seen, cookie } = d;
  page(
    'Deployment check',
    d.findings.length
      ? h(
          'section',
          { 'aria-labelledby': 'findings-title' },
          h('h2', { id: 'findings-title' }, `${d.findings.length} finding${d.findings.length === 1 ? '' : 's'}`),
          h('ul', {}, ...d.findings.map((f) => h('li', {}, h('strong', { class: 'bad' }, f.code), ': ', f.message))),
        )
      : h('p', { class: 'ok' }, 'No findings: the cookie reaches this browser and the proxies are trusted as they should be.'),
    h('h2', {}, 'What svc sees of this page’s requests'),
    table('Request as seen', ['Scheme', 'Host', 'Client IP', 'Forwarded headers'], [[seen.scheme, seen.host, seen.clientIp, seen.forwarded ? 'yes' : 'no']], ''),
    h('h2', {}, 'Session cookie'),
    table(
      'Session cookie attributes',
      ['Name', 'Secure', 'SameSite', 'Domain', 'Partitioned'],
      [[cookie.name, cookie.secure ? 'yes' : 'no', cookie.sameSite, cookie.domain ?? '(this host only)', cookie.partitioned ? 'yes' : 'no']],
      '',
    ),
    h('h2', {}, 'Trusted frontends'),
    d.frontendOrigins.length ? h('ul', {}, ...d.frontendOrigins.map((o) => h('li', {}, h('code', {}, o)))) : h('p', { class: 'empty' }, 'None (SVC_FRONTEND_URLS is empty): only pages of svc’s own origin may call it.'),
  );
}
