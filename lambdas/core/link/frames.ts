import type { RunAgentInput } from '@ag-ui/core';
import type { AgentSkill } from '../model.js';

/**
 * The provider link's frames as the core sends and takes them. Their zod schemas, which providers
 * share, are in `lambdas/link/wire.ts`; the door parses what comes in with those, and a type check
 * there keeps these shapes and the schemas one.
 */

/** The wire's version, in every frame. */
export const LINK_VERSION = 1;

/** What funduq tells a provider. */
export type ToProvider =
  /** The first frame on a link: funduq's proof of itself (a signature over the provider's nonce and the link). */
  | { v: 1; type: 'welcome'; connectionId: string; signature: string; heartbeatSeconds: number }
  | { v: 1; type: 'registered'; agents: string[]; refused: { name: string; reason: string }[] }
  /** An offer: accept, decline (full now) or refuse (never) it, naming `offer`. */
  | { v: 1; type: 'run'; runId: string; offer: number; agent: string; input: RunAgentInput }
  /** Stop the run (a cancel, a limit, an offer withdrawn) and forget it; answer `cancelled` if it was running. */
  | { v: 1; type: 'cancel'; runId: string; reason: string }
  /** The run's end is recorded: forget it. */
  | { v: 1; type: 'settled'; runId: string }
  /** The answer to `resume`: for each run still the provider's, the last seq funduq stored; the others are gone. */
  | { v: 1; type: 'resumed'; runs: { runId: string; lastSeq: number }[]; gone: string[] }
  | { v: 1; type: 'heartbeat' }
  /** A frame funduq could not take, and why. */
  | { v: 1; type: 'error'; code: string; message: string; runId?: string };

/** An agent a provider serves on its link, as it registers it. */
export interface LinkedAgentCard {
  name: string;
  description: string;
  skills?: AgentSkill[];
  takesInterjections?: boolean;
}

/** What a provider tells funduq (`part` frames, which carry a larger one in pieces, are joined by the door). */
export type FromProvider =
  | { v: 1; type: 'register'; agents: LinkedAgentCard[] }
  | { v: 1; type: 'accept'; runId: string; offer: number }
  | { v: 1; type: 'decline'; runId: string; offer: number; reason?: string }
  | { v: 1; type: 'refuse'; runId: string; offer: number; reason: string }
  /** AG-UI events of a run, each with its seq (1, 2, … per run), in order within a frame. */
  | { v: 1; type: 'events'; runId: string; events: { seq: number; event?: unknown }[] }
  /** The receipt of a cancel: the agent was stopped after the events through `lastSeq`. */
  | { v: 1; type: 'cancelled'; runId: string; lastSeq: number }
  /** After a reconnect: the runs the provider still holds. */
  | { v: 1; type: 'resume'; runs: string[] }
  | { v: 1; type: 'heartbeat' }
  /**
   * The first frame on a link. API Gateway sends nothing before `$connect` returns, so on AWS the
   * welcome answers it (the transport's doing); on one machine the welcome went with the upgrade.
   */
  | { v: 1; type: 'hello' };

/** The handshake's proof, carried by the WebSocket upgrade request (a message cannot precede API Gateway's `$connect`). */
export interface LinkProof {
  v: 1;
  providerId: string;
  /** Fresh per connection attempt; never accepted twice. */
  nonce: string;
  /** Epoch ms when the proof was made. */
  time: number;
  /** funduq's public key as the provider pinned it. */
  gatewayKey: string;
  /** The provider's Ed25519 signature over `proofText`. */
  signature: string;
}

/** What a provider signs to open a link: it names funduq's key, so a proof made for one gateway opens no other. */
export function proofText(proof: Pick<LinkProof, 'providerId' | 'gatewayKey' | 'nonce' | 'time'>): string {
  return `funduq-link/v1\n${proof.providerId}\n${proof.gatewayKey}\n${proof.nonce}\n${proof.time}`;
}

/** What funduq signs in its welcome: the provider's nonce and the link, so the proof cannot be replayed to another. */
export function welcomeText(providerId: string, nonce: string, connectionId: string): string {
  return `funduq-link/v1 welcome\n${providerId}\n${nonce}\n${connectionId}`;
}
