/** An answer longer than a caller reads: the part of it past the bound is never read. */
export class AnswerTooLarge extends Error {
  constructor() {
    super('an answer larger than expected');
  }
}

/**
 * A fetch answer's body as text, at most `max` bytes (for services svc calls: the breach range API, a
 * captcha verify endpoint). A longer one, declared or streamed, throws AnswerTooLarge.
 */
export async function readBounded(res: Response, max: number): Promise<string> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel().catch(() => {});
    throw new AnswerTooLarge();
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw new AnswerTooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
