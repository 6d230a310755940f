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
 * A form whose submit runs `action` with its fields, with the button disabled meanwhile; an error
 * is announced (and the form stays as it was).
 */
export function form(attrs: { label: string; submit: string; action: (data: Record<string, string>, form: HTMLFormElement) => Promise<void> }, ...fields: Child[]): HTMLFormElement {
  const button = h('button', { type: 'submit' }, attrs.submit);
  const el = h('form', { 'aria-label': attrs.label, novalidate: true }, ...fields, h('div', { class: 'actions' }, button));
  el.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = Object.fromEntries([...new FormData(el)].map(([k, v]) => [k, String(v)]));
    button.disabled = true;
    clearMessages();
    attrs
      .action(data, el)
      .catch((e: unknown) => showError(e))
      .finally(() => (button.disabled = false));
  });
  return el;
}

/** A button that runs `action`, disabled meanwhile; errors are announced. */
export function actionButton(label: string, action: () => Promise<void>, attrs: Attrs = {}): HTMLButtonElement {
  const button = h('button', { type: 'button', ...attrs }, label);
  button.addEventListener('click', () => {
    button.disabled = true;
    clearMessages();
    action()
      .catch((e: unknown) => showError(e))
      .finally(() => (button.disabled = false));
  });
  return button;
}

const errorRegion = () => document.getElementById('error')!;
const statusRegion = () => document.getElementById('status')!;

export function clearMessages(): void {
  errorRegion().textContent = '';
  statusRegion().textContent = '';
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
  network_error: 'The service cannot be reached. Check your connection and try again.',
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

/** Announces an error (role="alert"); `e` is an SvcError or anything thrown. */
export function showError(e: unknown): void {
  if (e && typeof e === 'object' && 'name' in e && (e as Error).name === 'NotAllowedError') {
    errorRegion().textContent = 'The passkey prompt was closed or timed out.';
  } else {
    errorRegion().textContent = describeError(e);
  }
}

/** Replaces the page: a heading (focused, so screen readers start there) and the content. */
export function page(title: string, ...content: Child[]): void {
  document.title = `${title} · svc`;
  const heading = h('h1', { tabindex: '-1' }, title);
  document.getElementById('main')!.replaceChildren(heading, ...content.filter((c): c is Node | string => !!c));
  heading.focus();
}

export const link = (href: string, text: string) => h('a', { href }, text);
