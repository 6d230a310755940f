// The example login UI's sentences for refused fields (examples/login/src/field-errors.ts): svc's
// `validation_failed` details, as the routes word them, turned into one sentence per field for people.
// The details below are what svc answers (valibot's words and svc's own).

import { describe, expect, it } from 'vitest';
import { fieldSentences, problemOf, sentenceFor, summaryOf } from '../../examples/login/src/field-errors.ts';

describe('the example UI: validation_failed details as sentences beside the fields', () => {
  it('reads the kind of problem from the message', () => {
    expect(problemOf('is required')).toEqual({ kind: 'missing' });
    expect(problemOf('Invalid type: Expected string but received undefined')).toEqual({ kind: 'missing' });
    expect(problemOf('Invalid length: Expected >=1 but received 0')).toEqual({ kind: 'tooShort', min: 1 });
    expect(problemOf('must be at least 8 characters')).toEqual({ kind: 'tooShort', min: 8 });
    expect(problemOf('Invalid length: Expected <=254 but received 300')).toEqual({ kind: 'tooLong', max: 254 });
    expect(problemOf('must be an email address')).toEqual({ kind: 'invalid', message: 'must be an email address' });
  });

  it('login: an empty form and a bad address, as POST /auth/login words them', () => {
    const empty = fieldSentences(
      [
        { path: 'email', message: 'must be an email address' },
        { path: 'password', message: 'Invalid length: Expected >=1 but received 0' },
      ],
      { email: '', password: '' },
    );
    expect([...empty.fields]).toEqual([
      ['email', 'Enter your email address.'],
      ['password', 'Enter your password.'],
    ]);
    expect(empty.general).toEqual([]);
    expect(fieldSentences([{ path: 'email', message: 'must be an email address' }], { email: 'ann@' }).fields.get('email')).toBe('Enter a valid email address.');
    expect(fieldSentences([{ path: 'email', message: 'is required' }]).fields.get('email')).toBe('Enter your email address.');
  });

  it('sign-up: a short password, names with a line break or too long, an overlong address (one sentence for its two problems)', () => {
    const { fields } = fieldSentences(
      [
        { path: 'email', message: 'Invalid length: Expected <=254 but received 300' },
        { path: 'email', message: 'must be an email address' },
        { path: 'password', message: 'must be at least 8 characters' },
        { path: 'firstname', message: 'must not hold line breaks or control characters' },
        { path: 'lastname', message: 'Invalid length: Expected <=100 but received 101' },
      ],
      { email: 'a'.repeat(300), password: 'short', firstname: 'a\nb', lastname: 'x'.repeat(101) },
    );
    expect(Object.fromEntries(fields)).toEqual({
      email: 'Use at most 254 characters.',
      password: 'Use at least 8 characters.',
      firstname: 'Write your first name on one line, without special characters.',
      lastname: 'Use at most 100 characters.',
    });
    expect(sentenceFor('password', ['must be at least 8 characters'], '')).toBe('Choose a password of at least 8 characters.');
  });

  it('reset, set and change password: newPassword and currentPassword', () => {
    expect(sentenceFor('newPassword', ['must be at least 8 characters'], 'short')).toBe('Use at least 8 characters.');
    expect(sentenceFor('newPassword', ['must be at least 8 characters'], '')).toBe('Choose a password of at least 8 characters.');
    expect(sentenceFor('newPassword', ['Invalid length: Expected <=256 but received 300'], 'x'.repeat(300))).toBe('Use at most 256 characters.');
    expect(sentenceFor('currentPassword', ['Invalid length: Expected >=1 but received 0'], '')).toBe('Enter your current password.');
  });

  it('a field the page does not know, and a detail that names no field, still read as sentences', () => {
    const { fields, general } = fieldSentences([
      { path: 'nickname', message: 'must be well-formed text' },
      { path: '', message: 'must be one of {"password"}, {"code"} or {"response"}' },
      { path: 'token', message: 'Invalid length: Expected <=512 but received 600' },
      { path: 'settings.theme', message: 'Invalid type: Expected string but received 12' },
    ]);
    expect(Object.fromEntries(fields)).toEqual({ nickname: 'Must be well-formed text.', token: 'Use at most 512 characters.', settings: 'Invalid type: Expected string but received 12.' });
    expect(general).toEqual(['Must be one of {"password"}, {"code"} or {"response"}.']);
  });

  it('a message that starts with an address or a host keeps it as written', () => {
    expect(sentenceFor('config:issuer', ['https://idp.example/.well-known/openid-configuration cannot be reached (ENOTFOUND)'], 'https://idp.example')).toBe(
      'https://idp.example/.well-known/openid-configuration cannot be reached (ENOTFOUND).',
    );
    expect(sentenceFor('url', ['127.0.0.1 is a loopback address'], 'http://127.0.0.1/')).toBe('127.0.0.1 is a loopback address.');
  });

  it('the summary above the form names the fields by their labels', () => {
    expect(summaryOf(['Email'])).toBe('Check this field: Email.');
    expect(summaryOf(['Email', 'Password'])).toBe('Check these fields: Email, Password.');
  });
});
