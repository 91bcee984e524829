import * as apigw from 'aws-cdk-lib/aws-apigateway';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { JWKS_PATH } from '../lambdas/doors/jwks.js';
import { ENV } from '../lambdas/runtimes/environment.js';
import type { DoorsApi } from './doors-api.js';

export interface PushSigningProps {
  doors: DoorsApi;
  /** The functions that sign push notifications (the stream handler). */
  signers: lambda.Function[];
}

/**
 * Signed push notifications: one generated secret that every key is derived from
 * (`lambdas/adapters/http/push-signing.ts`), readable by the functions that sign with the keys and
 * by the doors that publish them, so all of them use the same keys; and the JWKS route, public,
 * since a receiver fetching the keys holds no caller's credential.
 */
export class PushSigning extends Construct {
  readonly seed: secretsmanager.Secret;

  constructor(scope: Construct, id: string, props: PushSigningProps) {
    super(scope, id);
    this.seed = new secretsmanager.Secret(this, 'Seed', {
      description: 'funduq: the seed the keys that sign push notifications are derived from (a new value replaces every key at once)',
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
    });
    for (const fn of [...props.signers, props.doors.streaming.function, props.doors.buffered.function]) {
      // The value only: grantRead would add DescribeSecret, which nothing here calls.
      fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [this.seed.secretArn] }));
      fn.addEnvironment(ENV.pushSigningSecretArn, this.seed.secretArn);
    }
    // A signer names the gateway as its JWTs' issuer: the URL the doors publish the keys under.
    for (const fn of props.signers) fn.addEnvironment(ENV.publicUrl, props.doors.url);
    props.doors.api.root
      .resourceForPath(JWKS_PATH)
      .addMethod('GET', new apigw.LambdaIntegration(props.doors.buffered.function, { scopePermissionToMethod: false }));
  }
}
