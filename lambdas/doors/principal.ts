import type { Context } from 'hono';
import { ANONYMOUS, type Principal } from '../core/model.js';

/** Who is asking. Doors take it from a resolver so each runtime plugs in its own authentication. */
export type PrincipalResolver = (c: Context) => Principal | undefined | Promise<Principal | undefined>;

export const openMode: PrincipalResolver = () => ANONYMOUS;
