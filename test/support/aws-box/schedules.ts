import type { BoxClock } from './clock.js';
import type { InvokeOutcome, LambdaService } from './lambda.js';
import type { Deployment } from './template.js';

const UNITS: Record<string, number> = { minute: 60_000, minutes: 60_000, hour: 3_600_000, hours: 3_600_000, day: 86_400_000, days: 86_400_000 };

/**
 * EventBridge's scheduled rules of the template (`rate(n unit)`), on the box's clock: each fires
 * one period after the deploy and every period after, invoking its Lambda targets with their
 * constant input. A target the function's resource policy does not let the rule invoke fails the
 * deploy, as it would fail every invocation on AWS. Moving the clock past a period fires it once.
 */
export class Schedules {
  private readonly cancels: Array<() => void> = [];
  private closed = false;
  /** Each invocation a rule made, by the rule's logical id, once it returned. */
  readonly invocations: Array<{ rule: string; outcome: InvokeOutcome }> = [];

  constructor(
    private readonly deployment: Deployment,
    private readonly lambda: LambdaService,
    private readonly clock: BoxClock,
  ) {}

  start(): void {
    const permissions = this.deployment.resources('AWS::Lambda::Permission').map(([, p]) => this.deployment.resolve(p.Properties));
    for (const [id, rule] of this.deployment.resources('AWS::Events::Rule')) {
      const props = this.deployment.resolve(rule.Properties);
      const rate = /^rate\((\d+) (minutes?|hours?|days?)\)$/.exec(String(props.ScheduleExpression ?? ''));
      if (!rate || props.State === 'DISABLED') continue;
      const period = Number(rate[1]) * UNITS[rate[2]];
      const ruleArn = this.deployment.attribute(id, 'Arn');
      for (const target of props.Targets ?? []) {
        const fn = this.lambda.fn(target.Arn);
        const allowed = permissions.some(
          (p) => p.Action === 'lambda:InvokeFunction' && p.Principal === 'events.amazonaws.com' && (p.SourceArn === undefined || p.SourceArn === ruleArn) && this.lambda.fn(p.FunctionName) === fn,
        );
        if (!allowed) throw new Error(`the rule ${id} cannot invoke ${fn.handler}: no resource policy lets events.amazonaws.com do it`);
        const input = target.Input === undefined ? {} : JSON.parse(target.Input);
        const fire = () => {
          if (this.closed) return;
          arm();
          void this.lambda.invoke(fn.handler, input).then(
            (outcome) => this.invocations.push({ rule: id, outcome }),
            () => {},
          );
        };
        const arm = () => this.cancels.push(this.clock.at(this.clock.now() + period, fire));
        arm();
      }
    }
  }

  close(): void {
    this.closed = true;
    for (const cancel of this.cancels) cancel();
  }
}
