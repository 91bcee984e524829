import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getSignedCookie, setSignedCookie } from 'hono/cookie';
import { timingSafeEqual } from 'hono/utils/buffer';
import { credentialIdOf, digest } from '../api-keys.js';
import type { AuditNote } from '../audit.js';
import { errorResponse } from '../http-errors.js';

/**
 * Who may use the console, and how a browser proves it: the admin token (or the read-only one)
 * given once to a sign-in form becomes a signed session cookie; every act carries the session's
 * CSRF token and comes from the console's own origin.
 */
export interface ConsoleAccess {
  /** The admin token: signing in with it may act. Absent, the console is open (one machine only). */
  adminToken?: string;
  /** A second token that signs in read-only: pages, never acts. */
  readToken?: string;
  /** Where the console is reached (the gateway's public URL): its origin is the acts' one, beside each request's own. */
  publicUrl?: string;
}

/** The console's path as the browser sees it: under the public URL's path (an API Gateway stage), else `/console/`. */
export function consoleBase(publicUrl: string | undefined): string {
  const path = publicUrl ? safely(() => new URL(publicUrl).pathname) : undefined;
  return `${(path ?? '/').replace(/\/*$/, '/')}console/`;
}

function safely<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

export type Role = 'admin' | 'read';

export interface Session {
  role: Role;
  /** Set in open mode: nobody signed in. */
  open: boolean;
  csrf: string;
  /** Who acted, in audit records: the token's digest (which token, after a rotation). */
  credentialId?: string;
}

/** A request's session, and the act it notes before its session is checked (`index.tsx`). */
export type ConsoleEnv = { Variables: { session: Session; note?: AuditNote } };

export const COOKIE = 'funduq_console';
/** How long a session lasts: a working day. */
const SESSION_SECONDS = 8 * 60 * 60;

export interface Sessions {
  /** Reads the request's session, or, in open mode, makes one. */
  guard: MiddlewareHandler<ConsoleEnv>;
  /** Refuses an act without a fresh CSRF token, from another origin, or by a read-only session. */
  act: MiddlewareHandler<ConsoleEnv>;
  /** The role a presented token signs in as, if any. */
  roleOf(token: string): Promise<Role | undefined>;
  begin(c: Context, role: Role): Promise<void>;
  end(c: Context): void;
  /** Whether anyone may use the console without signing in. */
  open: boolean;
  /** The origin of a request as the browser sees it. */
  sameOrigin(c: Context): boolean;
}

export function sessions(access: ConsoleAccess): Sessions {
  const open = access.adminToken === undefined;
  // Signed with a key made from the tokens: a rotated token ends every session it began. Open, a key
  // of this process's own (sessions of one machine's gateway end when it restarts).
  const secret = open ? crypto.randomUUID() + crypto.randomUUID() : digest(`funduq-console\u0000${access.adminToken}\u0000${access.readToken ?? ''}`);
  const ids = {
    admin: access.adminToken === undefined ? undefined : credentialIdOf(access.adminToken),
    read: access.readToken === undefined ? undefined : credentialIdOf(access.readToken),
  };
  const publicOrigin = access.publicUrl ? safeOrigin(access.publicUrl) : undefined;
  const base = consoleBase(access.publicUrl);
  const cookiePath = base.slice(0, -1);

  const sameOrigin = (c: Context) => {
    const origin = c.req.header('Origin');
    const site = c.req.header('Sec-Fetch-Site');
    if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
    if (origin === undefined) return site !== undefined || c.req.method === 'GET';
    return origin === requestOrigin(c) || origin === publicOrigin;
  };

  const read = async (c: Context): Promise<Session | undefined> => {
    const value = await getSignedCookie(c, await secret, COOKIE);
    const [role, expires, nonce] = typeof value === 'string' ? value.split('.') : [];
    if ((role !== 'admin' && role !== 'read') || !nonce || !(Number(expires) > Date.now())) return undefined;
    const credentialId = await ids[role];
    return { role, open, csrf: await csrfOf(await secret, nonce), ...(credentialId ? { credentialId } : {}) };
  };

  const begin = async (c: Context, role: Role) => {
    const nonce = crypto.randomUUID();
    const expires = Date.now() + SESSION_SECONDS * 1000;
    await setSignedCookie(c, COOKIE, `${role}.${expires}.${nonce}`, await secret, {
      path: cookiePath,
      httpOnly: true,
      secure: isHttps(c),
      sameSite: 'Strict',
      maxAge: SESSION_SECONDS,
      expires: new Date(expires),
    });
    return { role, open, csrf: await csrfOf(await secret, nonce) };
  };

  return {
    open,
    sameOrigin,
    guard: async (c, next) => {
      let session = await read(c);
      if (!session && open) session = await begin(c, 'admin');
      if (!session) {
        if (c.req.method === 'GET' && !c.req.path.endsWith('.json') && !c.req.path.endsWith('/stream')) {
          const within = c.req.path.replace(/^\/console\/?/, '') + (new URL(c.req.url).search || '');
          return c.redirect(`${base}sign-in?next=${encodeURIComponent(within)}`, 303);
        }
        return errorResponse(c, 'console_session_required', `sign in to the console first (${base}sign-in)`);
      }
      c.set('session', session);
      await next();
    },
    act: async (c, next) => {
      const session = c.get('session');
      if (!sameOrigin(c)) return errorResponse(c, 'console_cross_origin', "the console's acts come only from its own pages");
      const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
      const given = typeof form.csrf === 'string' ? form.csrf : (c.req.header('X-CSRF-Token') ?? '');
      if (!(await timingSafeEqual(session.csrf, given))) return errorResponse(c, 'console_csrf_invalid', 'the form is stale or not from the console: reload the page and try again');
      if (session.role !== 'admin') return errorResponse(c, 'console_read_only', 'this session is read-only: sign in with the admin token to act');
      await next();
    },
    roleOf: async (token) => {
      if (access.adminToken !== undefined && (await timingSafeEqual(access.adminToken, token))) return 'admin';
      if (access.readToken !== undefined && (await timingSafeEqual(access.readToken, token))) return 'read';
      return undefined;
    },
    begin: async (c, role) => {
      await begin(c, role);
    },
    end: (c) => deleteCookie(c, COOKIE, { path: cookiePath, secure: isHttps(c), httpOnly: true, sameSite: 'Strict' }),
  };
}

/** The origin a browser sent the request to: behind API Gateway or a proxy, the forwarded scheme. */
function requestOrigin(c: Context): string {
  const url = new URL(c.req.url);
  const proto = c.req.header('X-Forwarded-Proto')?.split(',')[0]?.trim();
  return `${proto === 'https' || proto === 'http' ? proto : url.protocol.slice(0, -1)}://${c.req.header('Host') ?? url.host}`;
}

function isHttps(c: Context): boolean {
  return requestOrigin(c).startsWith('https:');
}

function safeOrigin(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

async function csrfOf(secret: string, nonce: string): Promise<string> {
  return digest(`csrf\u0000${secret}\u0000${nonce}`);
}
