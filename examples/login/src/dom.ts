// The few DOM helpers the pages share: element building, forms, and the two announcement regions
// (errors in a role="alert" region, progress in a role="status" one, both aria-live); a refused field's
// sentence stands beside the field (field-errors.ts words it).

import { fieldSentences, summaryOf, type ErrorDetail } from './field-errors.ts';

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
 * focus (a disabled button drops it to <body>, and a keyboard user starts over); errors are announced,
 * those of fields beside the fields of `scope` (the form that was sent).
 */
function whileBusy(button: HTMLButtonElement, work: () => Promise<void>, scope?: ParentNode): void {
  if (button.getAttribute('aria-disabled') === 'true') return;
  button.setAttribute('aria-disabled', 'true');
  clearMessages();
  work()
    .catch((e: unknown) => showError(e, { scope }))
    .finally(() => button.removeAttribute('aria-disabled'));
}

/**
 * A form whose submit runs `action` with its fields, the button busy meanwhile; an error is announced (and
 * the form stays as it was); a refused field gets its sentence beside it.
 */
export function form(attrs: { label: string; submit: string; action: (data: Record<string, string>, form: HTMLFormElement) => Promise<void> }, ...fields: Child[]): HTMLFormElement {
  const button = h('button', { type: 'submit' }, attrs.submit);
  const el = h('form', { 'aria-label': attrs.label, novalidate: true }, ...fields, h('div', { class: 'actions' }, button));
  el.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = Object.fromEntries([...new FormData(el)].map(([k, v]) => [k, String(v)]));
    whileBusy(button, () => attrs.action(data, el), el);
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
  clearFieldErrors(document);
}

/** Removes the field errors inside `scope`: their sentences, and the marks on their inputs. */
export function clearFieldErrors(scope: ParentNode): void {
  for (const input of scope.querySelectorAll('[aria-invalid]')) {
    input.removeAttribute('aria-invalid');
    const kept = (input.getAttribute('aria-describedby') ?? '').split(/\s+/).filter((id) => id && !id.endsWith('-error') && id !== 'error');
    if (kept.length) input.setAttribute('aria-describedby', kept.join(' '));
    else input.removeAttribute('aria-describedby');
  }
  for (const sentence of scope.querySelectorAll('.field-error')) sentence.remove();
}

/**
 * Marks `input` invalid and describes it by `describedBy` (an element's id), first: a screen reader
 * that reaches the input reads what is wrong before its hint.
 */
export function markInvalid(input: HTMLInputElement, describedBy: string): void {
  input.setAttribute('aria-invalid', 'true');
  const others = (input.getAttribute('aria-describedby') ?? '').split(/\s+/).filter((id) => id && id !== describedBy);
  input.setAttribute('aria-describedby', [describedBy, ...others].join(' '));
}

/** The field of `scope` named `name` that a person fills in (not a hidden one, e.g. `username` for password managers). */
function inputNamed(scope: ParentNode, name: string): HTMLInputElement | null {
  return [...scope.querySelectorAll<HTMLInputElement>(`input[name="${CSS.escape(name)}"]`)].find((input) => !input.hidden && input.type !== 'hidden') ?? null;
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
  invalid_token: 'This link cannot be used any more: ask for a new one.',
  captcha_required: 'There were failed sign-ins from here: confirm you are a person below, then try again.',
  captcha_failed: 'The check that you are a person did not pass: do it again below, then try again.',
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
 * The fields of `scope` that `validation_failed` details name (by their first path segment, the input's
 * name), each with its sentence for people beside it (`<p class="field-error">` after the input), marked
 * aria-invalid and described by that sentence; the first one gets the focus. Returns what goes above:
 * a summary naming the fields by their labels, and the sentences of details that name no field here.
 */
function showFieldErrors(scope: ParentNode, details: readonly ErrorDetail[]): string {
  const values: Record<string, string> = {};
  for (const input of scope.querySelectorAll<HTMLInputElement>('input[name]')) values[input.name] ??= input.value;
  const { fields, general } = fieldSentences(details, values);
  const labels: string[] = [];
  let first: HTMLInputElement | undefined;
  for (const [name, sentence] of fields) {
    const input = inputNamed(scope, name);
    if (!input) {
      general.push(sentence);
      continue;
    }
    const id = `${input.id || `f-${name}`}-error`;
    input.after(h('p', { class: 'field-error', id }, sentence));
    markInvalid(input, id);
    labels.push(input.labels?.[0]?.textContent ?? name);
    first ??= input;
  }
  first?.focus();
  return [...(labels.length ? [summaryOf(labels)] : []), ...general].join(' ');
}

const isValidationError = (e: unknown): e is { code: 'validation_failed'; details: ErrorDetail[] } =>
  !!e && typeof e === 'object' && (e as { code?: unknown }).code === 'validation_failed' && Array.isArray((e as { details?: unknown }).details) && (e as { details: unknown[] }).details.length > 0;

/**
 * Announces an error (role="alert"); `e` is an SvcError or anything thrown. A `validation_failed` puts a
 * sentence beside each field of `scope` it names (default: the page), and a summary above. `region`:
 * where the announcement goes (default the page's alert region; the step-up dialog has its own).
 */
export function showError(e: unknown, where: { scope?: ParentNode | undefined; region?: HTMLElement } = {}): void {
  const region = where.region ?? errorRegion();
  if (e && typeof e === 'object' && 'name' in e && (e as Error).name === 'NotAllowedError') {
    region.textContent = 'The passkey prompt was closed or timed out.';
    return;
  }
  const scope = where.scope ?? document.getElementById('main')!;
  region.textContent = isValidationError(e) ? showFieldErrors(scope, e.details) : describeError(e);
}

/** The app's name (`app.name` of svc's config, carried by /config.js), else `svc`. */
export const appName = (): string => window.SVC_APP_NAME || 'svc';

/** Replaces the page: a heading (focused, so screen readers start there) and the content. */
export function page(title: string, ...content: Child[]): void {
  document.title = `${title} · ${appName()}`;
  const heading = h('h1', { tabindex: '-1' }, title);
  document.getElementById('main')!.replaceChildren(heading, ...content.filter((c): c is Node | string => !!c));
  heading.focus();
}

export const link = (href: string, text: string) => h('a', { href }, text);
