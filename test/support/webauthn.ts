// A software authenticator for tests (a passkey on a "device" of the test's own): it answers
// navigator.credentials.create/get as a browser would, as RegistrationResponseJSON /
// AuthenticationResponseJSON, with a P-256 key (ES256), a resident credential and a signature counter.
// Its CBOR comes from a library (tiny-cbor, also @simplewebauthn's); svc's own code never builds CBOR.
// Knobs let a test tamper with exactly one thing: the origin, the RP id, the challenge, the counter.

import { encodeCBOR, type CBORType } from '@levischuck/tiny-cbor';
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

const b64url = (b: Uint8Array | Buffer) => Buffer.from(b).toString('base64url');
const sha256 = (b: Uint8Array | string) => createHash('sha256').update(b).digest();

export interface CreationOptions {
  challenge: string;
  rp: { id?: string; name: string };
  user: { id: string; name: string };
}
export interface RequestOptions {
  challenge: string;
  rpId?: string;
}

export class SoftAuthenticator {
  readonly credentialId = randomBytes(16);
  private readonly key: { privateKey: KeyObject; publicKey: KeyObject } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  counter = 0;
  userHandle = '';

  constructor(
    /** The page origin the browser would report. */
    public origin: string,
  ) {}

  private authData(rpId: string, flags: number, attested?: Buffer): Buffer {
    const count = Buffer.alloc(4);
    count.writeUInt32BE(this.counter);
    return Buffer.concat([sha256(rpId), Buffer.from([flags]), count, ...(attested ? [attested] : [])]);
  }

  /** navigator.credentials.create(): a `none` attestation of a new resident ES256 credential. */
  create(options: CreationOptions, tamper: { rpId?: string; challenge?: string; origin?: string } = {}) {
    const rpId = tamper.rpId ?? options.rp.id!;
    this.userHandle = options.user.id;
    const jwk = this.key.publicKey.export({ format: 'jwk' });
    // COSE_Key: kty EC2 (1: 2), alg ES256 (3: -7), crv P-256 (-1: 1), x (-2), y (-3).
    const coseKey = new Map<number, CBORType>();
    coseKey.set(1, 2);
    coseKey.set(3, -7);
    coseKey.set(-1, 1);
    coseKey.set(-2, new Uint8Array(Buffer.from(jwk.x!, 'base64url')));
    coseKey.set(-3, new Uint8Array(Buffer.from(jwk.y!, 'base64url')));
    const cose = encodeCBOR(coseKey);
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(this.credentialId.length);
    const attested = Buffer.concat([Buffer.alloc(16), idLength, this.credentialId, Buffer.from(cose)]);
    // Flags: user present (0x01), user verified (0x04), attested credential data (0x40).
    const authData = this.authData(rpId, 0x45, attested);
    const attestation = new Map<string, CBORType>();
    attestation.set('fmt', 'none');
    attestation.set('attStmt', new Map<string, CBORType>());
    attestation.set('authData', new Uint8Array(authData));
    const attestationObject = encodeCBOR(attestation);
    const clientDataJSON = JSON.stringify({ type: 'webauthn.create', challenge: tamper.challenge ?? options.challenge, origin: tamper.origin ?? this.origin, crossOrigin: false });
    return {
      id: b64url(this.credentialId),
      rawId: b64url(this.credentialId),
      type: 'public-key' as const,
      response: { clientDataJSON: b64url(Buffer.from(clientDataJSON)), attestationObject: b64url(attestationObject), transports: ['internal'] },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }

  /**
   * navigator.credentials.get(): an assertion over the challenge; the counter goes up unless told
   * otherwise. `userVerified: false`: a security key touched without its PIN (UP without UV).
   */
  get(options: RequestOptions, tamper: { rpId?: string; challenge?: string; origin?: string; counter?: number; userVerified?: boolean } = {}) {
    this.counter = tamper.counter ?? this.counter + 1;
    // Flags: user present (0x01), user verified (0x04).
    const authData = this.authData(tamper.rpId ?? options.rpId!, tamper.userVerified === false ? 0x01 : 0x05);
    const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge: tamper.challenge ?? options.challenge, origin: tamper.origin ?? this.origin, crossOrigin: false }));
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), this.key.privateKey);
    return {
      id: b64url(this.credentialId),
      rawId: b64url(this.credentialId),
      type: 'public-key' as const,
      response: { clientDataJSON: b64url(clientDataJSON), authenticatorData: b64url(authData), signature: b64url(signature), userHandle: this.userHandle },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }
}
