// The few DOM helpers the pages share: element building, forms, and the two announcement regions
// (errors in a role="alert" region, progress in a role="status" one, both aria-live).

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | boolean | ((event: Event) => void) | undefined>;

/** `h('button', { type: 'button', onclick: go }, 'Go')`. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, value);
  }
  for (const child of children) if (child !== null && child !== undefined && child !== false) el.append(child);
  return el;
}

let ids = 0;
/** A labelled input: `<label for>` + `<input id>`, with an optional hint tied by aria-describedby. */
export function field(label: string, input: Attrs & { name: string }, hint?: string): HTMLElement {
  const id = `f${++ids}-${input.name}`;
  const hintId = hint ? `${id}-hint` : undefined;
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    h('input', { id, ...(hintId ? { 'aria-describedby': hintId } : {}), ...input }),
    hint ? h('p', { class: 'hint', id: hintId }, hint) : null,
  );
}

/**
 * Runs `work` with `button` busy: marked aria-disabled and ignoring presses meanwhile, but keeping the
 * focus (a disabled button drops it to <body>, and a keyboard user starts over); errors are announced.
 */
function whileBusy(button: HTMLButtonElement, work: () => Promise<void>): void {
  if (button.getAttribute('aria-disabled') === 'true') return;
  button.setAttribute('aria-disabled', 'true');
  clearMessages();
  work()
    .catch((e: unknown) => showError(e))
    .finally(() => button.removeAttribute('aria-disabled'));
}

/** A form whose submit runs `action` with its fields, the button busy meanwhile; an error is announced (and the form stays as it was). */
export function form(attrs: { label: string; submit: string; action: (data: Record<string, string>, form: HTMLFormElement) => Promise<void> }, ...fields: Child[]): HTMLFormElement {
  const button = h('button', { type: 'submit' }, attrs.submit);
  const el = h('form', { 'aria-label': attrs.label, novalidate: true }, ...fields, h('div', { class: 'actions' }, button));
  el.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = Object.fromEntries([...new FormData(el)].map(([k, v]) => [k, String(v)]));
    whileBusy(button, () => attrs.action(data, el));
  });
  return el;
}

/** A button that runs `action`, busy meanwhile; errors are announced. */
export function actionButton(label: string, action: () => Promise<void>, attrs: Attrs = {}): HTMLButtonElement {
  const button = h('button', { type: 'button', ...attrs }, label);
  button.addEventListener('click', () => whileBusy(button, action));
  return button;
}

const errorRegion = () => document.getElementById('error')!;
const statusRegion = () => document.getElementById('status')!;

export function clearMessages(): void {
  errorRegion().textContent = '';
  statusRegion().textContent = '';
  for (const input of document.querySelectorAll('[aria-invalid]')) {
    input.removeAttribute('aria-invalid');
    input.setAttribute('aria-describedby', (input.getAttribute('aria-describedby') ?? '').replace(/\s*\berror\b/, '').trim());
    if (!input.getAttribute('aria-describedby')) input.removeAttribute('aria-describedby');
  }
}

/** Announces progress or a result (role="status"). */
export function say(text: string): void {
  statusRegion().textContent = text;
}

/**
 * Words for the codes a person meets on these pages. The service's messages are written for the
 * developer calling it (some name the route to call next), so the page says it its own way.
 */
const FOR_A_PERSON: Record<string, string> = {
  email_not_verified: 'Confirm your email address first: follow the link in the mail we sent you.',
  reauthentication_required: 'Confirm it is you first: this change needs a recent sign-in.',
  network_error: 'The service cannot be reached. Check your connection and try again (developers: is svc running, and is this origin in its SVC_FRONTEND_URLS?).',
  unexpected_response: 'The service answered something unexpected. Try again later.',
};

/** What a person reads for an error: our words for its code, else the service's message. */
export function describeError(e: unknown): string {
  if (e && typeof e === 'object' && 'code' in e && 'message' in e) {
    const { code, message } = e as { code: string; message: string };
    return FOR_A_PERSON[code] ?? message;
  }
  return e instanceof Error ? e.message : String(e);
}

/**
 * The fields of this page that `validation_failed` details name (by their first path segment, the
 * input's name), each marked aria-invalid and described by the error; the message in the words of
 * their labels ("New password: must be at least 8 characters", not "newPassword: ...").
 */
function markInvalidFields(details: { path: string; message: string }[]): string {
  const lines: string[] = [];
  for (const { path, message } of details) {
    const input = document.querySelector<HTMLInputElement>(`main input[name="${CSS.escape(path.split('.')[0]!)}"]`);
    const label = input?.labels?.[0]?.textContent;
    if (input) {
      input.setAttribute('aria-invalid', 'true');
      input.setAttribute('aria-describedby', `${input.getAttribute('aria-describedby') ?? ''} error`.trim());
    }
    lines.push(label ? `${label}: ${message}` : `${path}: ${message}`);
  }
  return lines.join(' ');
}

/** Announces an error (role="alert"); `e` is an SvcError or anything thrown. */
export function showError(e: unknown): void {
  if (e && typeof e === 'object' && 'name' in e && (e as Error).name === 'NotAllowedError') {
    errorRegion().textContent = 'The passkey prompt was closed or timed out.';
    return;
  }
  const details = e && typeof e === 'object' && 'code' in e && (e as { code: string }).code === 'validation_failed' ? (e as { details?: { path: string; message: string }[] }).details : undefined;
  errorRegion().textContent = details?.length ? markInvalidFields(details) : describeError(e);
}

/** Replaces the page: a heading (focused, so screen readers start there) and the content. */
export function page(title: string, ...content: Child[]): void {
  document.title = `${title} · svc`;
  const heading = h('h1', { tabindex: '-1' }, title);
  document.getElementById('main')!.replaceChildren(heading, ...content.filter((c): c is Node | string => !!c));
  heading.focus();
}

export const link = (href: string, text: string) => h('a', { href }, text);
