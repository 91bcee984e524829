import type { Deployment } from './template.js';

interface Statement {
  Effect: 'Allow' | 'Deny';
  Action: string | string[];
  Resource: string | string[];
}

/** Who made an AWS call: a function's role, or the state machine's. */
export interface Caller {
  /** The function's handler name (`dispatcher`, …) or `state-machine`. */
  name: string;
  roleId: string;
}

export interface Denial {
  caller: string;
  action: string;
  resource: string;
}

/**
 * The identity-based policies of the template's roles, evaluated as IAM does for one account: a
 * call is allowed when some statement allows its action on its resource and none denies it.
 * Conditions are not evaluated (the stack writes none on its functions' roles).
 */
export class Iam {
  readonly denials: Denial[] = [];
  private readonly statements = new Map<string, Statement[]>();

  constructor(private readonly deployment: Deployment) {
    for (const [, policy] of deployment.resources('AWS::IAM::Policy')) {
      const statements = toArray(deployment.resolve(policy.Properties!.PolicyDocument).Statement) as Statement[];
      for (const role of policy.Properties!.Roles as Array<{ Ref: string }>) this.add(role.Ref, statements);
    }
    for (const [id, role] of deployment.resources('AWS::IAM::Role')) {
      for (const inline of (role.Properties?.Policies ?? []) as Array<{ PolicyDocument: unknown }>) {
        this.add(id, toArray(deployment.resolve(inline.PolicyDocument).Statement) as Statement[]);
      }
    }
  }

  allows(roleId: string, action: string, resource: string): boolean {
    const matching = (this.statements.get(roleId) ?? []).filter(
      (s) => toArray(s.Action).some((a) => glob(a, action, true)) && toArray(s.Resource).some((r) => glob(r, resource, false)),
    );
    return matching.some((s) => s.Effect === 'Allow') && !matching.some((s) => s.Effect === 'Deny');
  }

  /** Checks a call; a refused one is recorded (the test fails on it) and its message is AWS's. */
  check(caller: Caller, action: string, resource: string): string | undefined {
    if (this.allows(caller.roleId, action, resource)) return undefined;
    this.denials.push({ caller: caller.name, action, resource });
    const role = this.deployment.physicalName(caller.roleId);
    return `User: arn:aws:sts::123456789012:assumed-role/${role}/${caller.name} is not authorized to perform: ${action} on resource: ${resource} because no identity-based policy allows the ${action} action`;
  }

  private add(roleId: string, statements: Statement[]): void {
    this.statements.set(roleId, [...(this.statements.get(roleId) ?? []), ...statements]);
  }
}

function toArray<T>(value: T | T[] | undefined): T[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/** IAM's wildcards: `*` any run of characters, `?` one; actions are matched without regard to case. */
function glob(pattern: string, value: string, ignoreCase: boolean): boolean {
  const source = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${source}$`, ignoreCase ? 'i' : '').test(value);
}
