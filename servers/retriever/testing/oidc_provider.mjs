// A real OpenID Connect provider for the tests (oidc.py beside it starts and stops it): the npm package
// oidc-provider (`make oidc-provider` installs it into .cache/oidc-provider), on 127.0.0.1 only.
//
//   node servers/retriever/testing/oidc_provider.mjs CONFIG.json
//
// CONFIG: {"modules": ".cache/oidc-provider/node_modules", "port": 0, "keyFile": "...", "clients": [{
//   "client_id", "client_secret", "scope": "read write", "groups": ["team_a"], "ttl": 300}]}
// Client-credentials grants only, with resource indicators (RFC 8707): a token asked for a resource is a
// JWT whose `aud` is that resource, signed RS256 by the key in keyFile (made there on the first start; a
// restart with another keyFile is the issuer's key rotation). The scopes read, write and admin; the
// client's groups in the token's `groups` claim. GET /test/jwks-hits: how many times the keys were fetched.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { default: Provider, errors } = await import(
  pathToFileURL(join(config.modules, 'oidc-provider', 'lib', 'index.js')).href);

function signingKey(file) {
  if (!existsSync(file)) {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const jwk = { ...privateKey.export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), alg: 'RS256', use: 'sig' };
    writeFileSync(file, JSON.stringify(jwk), { mode: 0o600 });
  }
  return JSON.parse(readFileSync(file, 'utf8'));
}

const clients = Object.fromEntries(config.clients.map((c) => [c.client_id, c]));
const issuer = `http://127.0.0.1:${config.port}`;
const provider = new Provider(issuer, {
  clients: config.clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    scope: c.scope,
    token_endpoint_auth_method: 'client_secret_post',
  })),
  jwks: { keys: [signingKey(config.keyFile)] },
  scopes: ['read', 'write', 'admin'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource, client) => {
        if (!/^https?:\/\//.test(resource)) throw new errors.InvalidTarget();
        return {
          scope: 'read write admin',
          audience: resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: clients[client.clientId]?.ttl ?? 300,
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  extraTokenClaims: (ctx, token) => ({ groups: clients[token.clientId]?.groups ?? [] }),
});

let jwksHits = 0;
provider.use(async (ctx, next) => {
  if (ctx.path === '/test/jwks-hits') {
    ctx.body = { hits: jwksHits };
    return;
  }
  if (ctx.path === '/jwks') jwksHits += 1;
  await next();
});

const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.closeAllConnections();
    process.exit(0);
  });
}
