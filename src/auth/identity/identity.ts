import type { Access } from '../access.js';
import type { KeyDefaults } from '../settings.js';
import { acceptedAudiences, bearerChallenge, mcpResource, protectedResourceMetadata, type RequestOrigin } from './metadata.js';
import { Principals } from './principal.js';
import type { IdentitySettings } from './settings.js';
import { looksLikeJwt, TokenVerifier, type TokenVerifierOptions } from './verifier.js';

/**
 * toolrouter as an OAuth 2.1 resource server (`auth.oauth`): access tokens of one issuer verified (verifier.ts), their
 * users mapped to what they may see (principal.ts), and what clients need to find the issuer (metadata.ts).
 */
export class Identity {
  readonly verifier: TokenVerifier;
  private readonly principals: Principals;

  constructor(
    readonly settings: IdentitySettings,
    keyDefaults: KeyDefaults,
    log?: TokenVerifierOptions['log'],
    /** The claims policies read (policy.groupsClaim and policy.claims), carried on each user's Access. */
    policyClaims: readonly string[] = [],
  ) {
    this.verifier = new TokenVerifier({ ...settings, audience: acceptedAudiences(settings), ...(log ? { log } : {}) });
    this.principals = new Principals({ ...(settings.claims ? { claims: settings.claims } : {}), defaultKey: settings.defaultKey ?? keyDefaults, policyClaims });
  }

  /** A credential that may be one of this issuer's tokens (API keys never look like a JWT). */
  accepts(credential: string): boolean {
    return looksLikeJwt(credential);
  }

  async authenticate(token: string): Promise<Access> {
    return this.principals.accessFor(await this.verifier.verify(token));
  }

  resource(request: RequestOrigin): string {
    return mcpResource(this.settings, request);
  }

  metadata(resource: string): Record<string, unknown> {
    return protectedResourceMetadata(this.settings, resource);
  }

  challenge(request: RequestOrigin, refusal?: Parameters<typeof bearerChallenge>[1]): string {
    return bearerChallenge(this.resource(request), refusal);
  }
}
