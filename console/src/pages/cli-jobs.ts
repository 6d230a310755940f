// The CLI connector's jobs (CONTRACT 8, docs/cli-connector.md): every background job (`GET /jobs`), and at
// `#/cli-jobs/<id>` one job's output with a signal to send. A job lives in the svc instance that started
// it: behind a load balancer, each request may reach another instance, which does not know it.

import { actionButton, h, href, page, say, table } from '../ui.ts';
import { CLI_CONNECTOR, pluginCall } from './plugins.ts';

interface JobSummary {
  id: string;
  cmd: string;
  argv: string[];
  owner: string;
  outputBytes: number;
  done?: number | string;
}
interface JobNews {
  done?: number | string;
  stdout: string[];
  stderr: string[];
}

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGKILL', 'SIGHUP', 'SIGUSR1', 'SIGUSR2'];

const stateOf = (done: number | string | undefined) => (done === undefined ? 'Running' : `Ended: ${typeof done === 'number' ? `exit ${done}` : done}`);

export async function cliJobsPage(params: string[] = []): Promise<void> {
  if (params[0]) return jobPage(params[0]);
  const list = h('div', { 'aria-live': 'polite' }, h('p', {}, 'Loading…'));
  const load = async () => {
    const jobs = await pluginCall<JobSummary[]>(`${CLI_CONNECTOR}/jobs`);
    list.replaceChildren(
      table(
        'Background jobs',
        ['Job', 'Owner', 'State'],
        jobs.map((j) => [
          h('div', {}, h('a', { href: href('cli-jobs', j.id) }, h('code', {}, j.id)), h('div', {}, `Script: ${j.cmd}`), h('div', {}, 'Arguments: ', h('code', {}, j.argv.join(' ')))),
          h('a', { href: href('users', j.owner) }, j.owner),
          // A span (lines by <br>): the table keeps a last <div> cell on one line.
          h('span', {}, stateOf(j.done), h('br'), `Output kept: ${j.outputBytes} bytes`),
        ]),
        'No background job on the instance that answered.',
      ),
    );
  };
  page(
    'CLI jobs',
    h('p', {}, 'Background jobs of the registered scripts (POST /run). Finished jobs are removed a minute after they end.'),
    h('p', { class: 'hint' }, 'A job is known only to the svc instance that started it: with several instances, refreshing may show another one’s jobs.'),
    h('div', { class: 'actions' }, actionButton('Refresh jobs', load, { class: 'secondary' })),
    list,
  );
  await load().catch((e: unknown) => {
    list.replaceChildren(h('p', { class: 'empty' }, 'The jobs could not be read.'));
    throw e;
  });
}

/** One job: its output as it comes (each read takes the new output), and a signal to its process group. */
async function jobPage(id: string): Promise<void> {
  const stdout = h('pre', { tabindex: '0', 'aria-labelledby': 'job-stdout' });
  const stderr = h('pre', { tabindex: '0', 'aria-labelledby': 'job-stderr' });
  const state = h('p', { role: 'status' });
  const signalId = 'job-signal';
  const signal = h('select', { id: signalId }, ...SIGNALS.map((s) => h('option', { value: s }, s)));

  const take = async (body: { signal?: string } = {}) => {
    const news = await pluginCall<JobNews>(`${CLI_CONNECTOR}/job/${encodeURIComponent(id)}`, { body });
    stdout.append(news.stdout.join(''));
    stderr.append(news.stderr.join(''));
    state.textContent = stateOf(news.done);
  };

  page(
    'CLI job',
    h('p', {}, h('a', { href: href('cli-jobs') }, 'All jobs')),
    h('p', {}, 'Job ', h('code', {}, id)),
    state,
    h('p', { class: 'hint' }, 'Reading takes the new output: its owner does not get what is read here.'),
    h('div', { class: 'actions' }, actionButton('Read new output', () => take(), { class: 'secondary' })),
    h(
      'div',
      { class: 'filters' },
      h('div', { class: 'field' }, h('label', { for: signalId }, 'Signal'), signal),
      h(
        'div',
        { class: 'actions' },
        actionButton('Send signal', async () => {
          await take({ signal: signal.value });
          say(`${signal.value} sent to the job.`);
        }),
      ),
    ),
    h('h2', { id: 'job-stdout' }, 'Output (stdout)'),
    stdout,
    h('h2', { id: 'job-stderr' }, 'Errors (stderr)'),
    stderr,
  );
  await take();
}
