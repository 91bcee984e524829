#!/usr/bin/env node
/**
 * The CDK app: `npx cdk deploy` puts funduq in the current account and region.
 * Settings come from CDK context (`-c key=value` or the `context` of cdk.json); defaults in
 * `DEFAULT_SETTINGS` (lib/funduq-stack.ts):
 *   threadQueueLimit=8  apiAuth=apiKey (none | apiKey | jwt + jwtUserPoolArn)  stageName=v1
 *   logRetentionDays=30  dispatcherConcurrency=10 (dispatcherReservedConcurrency: opt-in)  maxReceiveCount=3  retainData=true
 *   adminTokenSecretName (default: a generated secret)  domainName + certificateArn  alarmEmail
 *   agentFunctions=name,arn,… (the Lambda functions agents of the `lambda` kind may run on)
 *   stackName=Funduq
 */
import { App } from 'aws-cdk-lib';
import { FunduqStack, settingsFromContext } from '../lib/funduq-stack.js';

const app = new App();
const stackName = (app.node.tryGetContext('stackName') as string | undefined) ?? 'Funduq';
new FunduqStack(app, stackName, {
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
  settings: settingsFromContext((key) => app.node.tryGetContext(key)),
});
