/* eslint-disable */
import * as types from './graphql';
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';

/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "\n  fragment AuthPayloadFields on AuthPayload {\n    accessToken\n    refreshToken\n    expiresAt\n    viewer { role platformAdmin user { id email name } tenant { id name } }\n  }\n": typeof types.AuthPayloadFieldsFragmentDoc,
    "\n  mutation SignUp($input: SignUpInput!) {\n    signUp(input: $input) {\n      ...AuthPayloadFields\n    }\n  }\n": typeof types.SignUpDocument,
    "\n  mutation LogIn($input: LogInInput!) {\n    logIn(input: $input) {\n      ...AuthPayloadFields\n    }\n  }\n": typeof types.LogInDocument,
    "\n  mutation RefreshSession($t: String!) {\n    refreshSession(refreshToken: $t) {\n      ...AuthPayloadFields\n    }\n  }\n": typeof types.RefreshSessionDocument,
    "\n  mutation LogOut($t: String!) {\n    logOut(refreshToken: $t)\n  }\n": typeof types.LogOutDocument,
    "\n  mutation AcceptInvitation($token: String!) {\n    acceptInvitation(token: $token)\n  }\n": typeof types.AcceptInvitationDocument,
    "\n  mutation VerifyEmail($token: String!) {\n    verifyEmail(token: $token)\n  }\n": typeof types.VerifyEmailDocument,
    "\n  mutation RequestEmailVerification {\n    requestEmailVerification\n  }\n": typeof types.RequestEmailVerificationDocument,
    "\n  mutation RequestPasswordReset($email: String!) {\n    requestPasswordReset(email: $email)\n  }\n": typeof types.RequestPasswordResetDocument,
    "\n  mutation ResetPassword($token: String!, $newPassword: String!) {\n    resetPassword(token: $token, newPassword: $newPassword)\n  }\n": typeof types.ResetPasswordDocument,
    "\n  query EmailVerified {\n    viewer { emailVerified }\n  }\n": typeof types.EmailVerifiedDocument,
    "\n  query Viewer {\n    viewer { role platformAdmin user { id email name } tenant { id name } }\n  }\n": typeof types.ViewerDocument,
    "\n  query Conversations {\n    conversations(first: 100) {\n      edges { node { id title mode model createdAt agentic visibility viewerIsOwner } }\n    }\n  }\n": typeof types.ConversationsDocument,
    "\n  query ConversationView($id: ID!) {\n    conversation(id: $id) {\n      id\n      title\n      mode\n      model\n      agentic\n      visibility\n      viewerIsOwner\n      createdAt\n      messages(first: 100) {\n        edges { node { id role content parts createdAt run { id } } }\n        pageInfo { hasNextPage endCursor }\n      }\n      runs(first: 10) {\n        edges { node { ...RunSummary } }\n      }\n    }\n  }\n": typeof types.ConversationViewDocument,
    "\n  query ConversationMessagesAfter($id: ID!, $after: String) {\n    conversation(id: $id) {\n      id\n      messages(first: 100, after: $after) {\n        edges { node { id role content parts createdAt run { id } } }\n        pageInfo { hasNextPage endCursor }\n      }\n    }\n  }\n": typeof types.ConversationMessagesAfterDocument,
    "\n  fragment RunSummary on Run {\n    id\n    kind\n    status\n    turns\n    attempt\n    maxAttempts\n    failureClass\n    error\n    terminationReason\n    inputTokens\n    outputTokens\n    costMicros\n    createdAt\n    startedAt\n    finishedAt\n    toolCalls { id name arguments status risk output error }\n    approvals { id kind status question createdAt expiresAt toolCall { id name arguments risk } }\n  }\n": typeof types.RunSummaryFragmentDoc,
    "\n  mutation CreateConversation($input: CreateConversationInput!) {\n    createConversation(input: $input) { id title mode model agentic createdAt }\n  }\n": typeof types.CreateConversationDocument,
    "\n  mutation UpdateConversation($id: ID!, $input: UpdateConversationInput!) {\n    updateConversation(id: $id, input: $input) { id title mode model agentic }\n  }\n": typeof types.UpdateConversationDocument,
    "\n  mutation SendMessage($input: SendMessageInput!) {\n    sendMessage(input: $input) {\n      message { id role content parts createdAt run { id } }\n      run { ...RunSummary }\n    }\n  }\n": typeof types.SendMessageDocument,
    "\n  subscription RunEvents($runId: ID!, $afterSeq: Int) {\n    runEvents(runId: $runId, afterSeq: $afterSeq) { seq runId type phase data timestamp }\n  }\n": typeof types.RunEventsDocument,
    "\n  mutation SetConversationVisibility($id: ID!, $visibility: ConversationVisibility!) {\n    setConversationVisibility(id: $id, visibility: $visibility) { id visibility viewerIsOwner }\n  }\n": typeof types.SetConversationVisibilityDocument,
    "\n  subscription ConversationEvents($id: ID!) {\n    conversationEvents(conversationId: $id) { seq runId type phase data timestamp }\n  }\n": typeof types.ConversationEventsDocument,
    "\n  mutation CancelRun($id: ID!) { cancelRun(id: $id) { id status } }\n": typeof types.CancelRunDocument,
    "\n  mutation PauseRun($id: ID!) { pauseRun(id: $id) { id status } }\n": typeof types.PauseRunDocument,
    "\n  mutation ResumeRun($id: ID!) { resumeRun(id: $id) { id status } }\n": typeof types.ResumeRunDocument,
    "\n  mutation StopRun($id: ID!) { stopRun(id: $id) { id status } }\n": typeof types.StopRunDocument,
    "\n  mutation ResolveApproval($id: ID!, $decision: ApprovalDecision!, $note: String) {\n    resolveApproval(id: $id, decision: $decision, note: $note) { id status decidedAt }\n  }\n": typeof types.ResolveApprovalDocument,
    "\n  mutation ResolveRollback($id: ID!, $choice: RollbackChoice!) {\n    resolveRollback(approvalId: $id, choice: $choice) { id status note }\n  }\n": typeof types.ResolveRollbackDocument,
    "\n  query Runs($status: [RunStatus!], $kind: [RunKind!], $after: String) {\n    runs(first: 50, status: $status, kind: $kind, after: $after) {\n      edges { node { id kind status turns inputTokens outputTokens costMicros createdAt finishedAt terminationReason failureClass conversation { id title } task { id title } user { id email } } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n": typeof types.RunsDocument,
    "\n  fragment SubagentFields on Subagent {\n    id role goal status priority depth result error failureClass createdAt startedAt finishedAt\n    run { id inputTokens outputTokens }\n    approval { id status expiresAt }\n  }\n": typeof types.SubagentFieldsFragmentDoc,
    "\n  query RunPage($id: ID!) {\n    run(id: $id) {\n      ...RunSummary\n      conversation { id title }\n      task { id title }\n      user { id email }\n      depth\n      parentRun { id kind status }\n      totalInputTokens totalOutputTokens totalCostMicros\n      subagents { ...SubagentFields }\n      events(afterSeq: 0, first: 500) { seq runId type phase data timestamp }\n      team {\n        id goal maxIterations tokenBudget tokensUsed\n        phases {\n          phase iteration attempt model status turns tokens output terminationReason startedAt finishedAt\n          run { id }\n          verdict { verdict summary issues { file problem suggestion } }\n        }\n      }\n    }\n  }\n": typeof types.RunPageDocument,
    "\n  query RunSubagents($id: ID!) {\n    run(id: $id) { id status subagents { ...SubagentFields } }\n  }\n": typeof types.RunSubagentsDocument,
    "\n  mutation CancelSubagent($id: ID!) {\n    cancelSubagent(id: $id) { id status }\n  }\n": typeof types.CancelSubagentDocument,
    "\n  query Tasks {\n    tasks(first: 50) {\n      edges { node { id title description status priority type complexity slug tags createdAt runs(first: 5) { edges { node { id status createdAt costMicros } } } } }\n    }\n  }\n": typeof types.TasksDocument,
    "\n  mutation CreateTask($input: CreateTaskInput!) {\n    createTask(input: $input) { id title status }\n  }\n": typeof types.CreateTaskDocument,
    "\n  mutation RunTask($id: ID!) { runTask(id: $id) { id status } }\n": typeof types.RunTaskDocument,
    "\n  query WorkspaceView {\n    workspace {\n      projectId\n      files { path size version updatedAt versions { version deleted size runId createdAt } }\n      snapshots { id label committed state kind createdAt run { id } }\n    }\n  }\n": typeof types.WorkspaceViewDocument,
    "\n  query WorkspaceFileContent($path: String!) {\n    workspace { projectId file(path: $path) { path size version content updatedAt } }\n  }\n": typeof types.WorkspaceFileContentDocument,
    "\n  query FileDiff($path: String!, $from: Int!, $to: Int!) {\n    fileDiff(path: $path, fromVersion: $from, toVersion: $to)\n  }\n": typeof types.FileDiffDocument,
    "\n  query SnapshotDiff($from: ID!, $to: ID!) {\n    snapshotDiff(from: $from, to: $to)\n  }\n": typeof types.SnapshotDiffDocument,
    "\n  mutation CreateSnapshot($label: String) { createSnapshot(label: $label) { id label } }\n": typeof types.CreateSnapshotDocument,
    "\n  mutation RestoreSnapshot($id: ID!) { restoreSnapshot(id: $id) { id label } }\n": typeof types.RestoreSnapshotDocument,
    "\n  query Settings {\n    agentSettings { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }\n  }\n": typeof types.SettingsDocument,
    "\n  mutation UpdateSettings($input: AgentSettingsInput!) {\n    updateAgentSettings(input: $input) { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }\n  }\n": typeof types.UpdateSettingsDocument,
    "\n  query ApiKeys { apiKeys { id name prefix role createdAt revokedAt } }\n": typeof types.ApiKeysDocument,
    "\n  mutation CreateApiKey($input: CreateApiKeyInput!) {\n    createApiKey(input: $input) { secret apiKey { id name prefix role createdAt revokedAt } }\n  }\n": typeof types.CreateApiKeyDocument,
    "\n  mutation RevokeApiKey($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }\n": typeof types.RevokeApiKeyDocument,
    "\n  mutation AddMember($input: AddMemberInput!) {\n    addMember(input: $input) { role pending invitationToken user { id email name } }\n  }\n": typeof types.AddMemberDocument,
    "\n  query Usage($from: Time!, $to: Time!) {\n    byDay: usageSummary(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }\n    byModel: usageSummary(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }\n    byUser: usageSummary(from: $from, to: $to, groupBy: USER) { key calls inputTokens outputTokens costMicros }\n    byKind: usageSummary(from: $from, to: $to, groupBy: RUN_KIND) { key calls inputTokens outputTokens costMicros }\n    budgets { id scope period tokenLimit costLimitMicros spentTokens spentMicros reservedTokens reservedMicros periodStart user { id email } }\n    activity(first: 10) { edges { node { id kind status inputTokens outputTokens costMicros createdAt user { id email } } } }\n  }\n": typeof types.UsageDocument,
    "\n  mutation SetBudget($input: SetBudgetInput!) { setBudget(input: $input) { id } }\n": typeof types.SetBudgetDocument,
    "\n  mutation DeleteBudget($id: ID!) { deleteBudget(id: $id) }\n": typeof types.DeleteBudgetDocument,
    "\n  query PlatformUsage($from: Time!, $to: Time!) {\n    byTenant: platformUsage(from: $from, to: $to, groupBy: TENANT) { key calls inputTokens outputTokens costMicros }\n    byModel: platformUsage(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }\n    byDay: platformUsage(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }\n  }\n": typeof types.PlatformUsageDocument,
    "\n  query Memberships {\n    viewer { memberships { role pending tenant { id name } } }\n  }\n": typeof types.MembershipsDocument,
    "\n  mutation SwitchTenant($t: String!, $tenantId: ID!) {\n    switchTenant(refreshToken: $t, tenantId: $tenantId) {\n      ...AuthPayloadFields\n    }\n  }\n": typeof types.SwitchTenantDocument,
    "\n  query Members {\n    members(first: 100) {\n      edges { node { role pending joinedAt user { id email name } } }\n    }\n  }\n": typeof types.MembersDocument,
    "\n  fragment RoutineFields on Routine {\n    id\n    name\n    description\n    trigger\n    cron\n    timezone\n    active\n    maxRetries\n    nextFireAt\n    steps { id key name type phase entry role { id name color } }\n    edges { from to condition }\n    runs(first: 5) { id status createdAt }\n  }\n": typeof types.RoutineFieldsFragmentDoc,
    "\n  query Routines {\n    routines { ...RoutineFields }\n  }\n": typeof types.RoutinesDocument,
    "\n  mutation RunRoutine($id: ID!, $input: String) {\n    runRoutine(id: $id, input: $input) { id kind status }\n  }\n": typeof types.RunRoutineDocument,
    "\n  query RoutineRun($runId: ID!) {\n    routineRun(runId: $runId) {\n      currentStep\n      context\n      routine { ...RoutineFields }\n      stepResults { stepKey stepName stepType passed output data inputTokens outputTokens executionCount durationMs roleColor role { id name color } createdAt }\n      metrics { inputTokens outputTokens executions steps { stepKey inputTokens outputTokens executions } }\n    }\n  }\n": typeof types.RoutineRunDocument,
    "\n  query Webhooks {\n    webhooks {\n      id url events active createdAt\n      deliveries(first: 20) { id event status attempts responseCode durationMs error createdAt }\n    }\n  }\n": typeof types.WebhooksDocument,
    "\n  mutation CreateWebhook($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }\n": typeof types.CreateWebhookDocument,
    "\n  mutation DeleteWebhook($id: ID!) { deleteWebhook(id: $id) }\n": typeof types.DeleteWebhookDocument,
    "\n  mutation TestWebhook($id: ID!) { testWebhook(id: $id) { id status } }\n": typeof types.TestWebhookDocument,
    "\n  query PlatformHealth { platformHealth { name status latencyMs error } }\n": typeof types.PlatformHealthDocument,
    "\n  query Plans { plans { name subagentsRunningMax spendRate spendBurst updatedAt } }\n": typeof types.PlansDocument,
    "\n  mutation SetPlan($input: SetPlanInput!) {\n    setPlan(input: $input) { name subagentsRunningMax spendRate spendBurst updatedAt }\n  }\n": typeof types.SetPlanDocument,
    "\n  mutation SetTenantPlan($tenantId: ID!, $plan: String!) {\n    setTenantPlan(tenantId: $tenantId, plan: $plan) { id plan }\n  }\n": typeof types.SetTenantPlanDocument,
};
const documents: Documents = {
    "\n  fragment AuthPayloadFields on AuthPayload {\n    accessToken\n    refreshToken\n    expiresAt\n    viewer { role platformAdmin user { id email name } tenant { id name } }\n  }\n": types.AuthPayloadFieldsFragmentDoc,
    "\n  mutation SignUp($input: SignUpInput!) {\n    signUp(input: $input) {\n      ...AuthPayloadFields\n    }\n  }\n": types.SignUpDocument,
    "\n  mutation LogIn($input: LogInInput!) {\n    logIn(input: $input) {\n      ...AuthPayloadFields\n    }\n  }\n": types.LogInDocument,
    "\n  mutation RefreshSession($t: String!) {\n    refreshSession(refreshToken: $t) {\n      ...AuthPayloadFields\n    }\n  }\n": types.RefreshSessionDocument,
    "\n  mutation LogOut($t: String!) {\n    logOut(refreshToken: $t)\n  }\n": types.LogOutDocument,
    "\n  mutation AcceptInvitation($token: String!) {\n    acceptInvitation(token: $token)\n  }\n": types.AcceptInvitationDocument,
    "\n  mutation VerifyEmail($token: String!) {\n    verifyEmail(token: $token)\n  }\n": types.VerifyEmailDocument,
    "\n  mutation RequestEmailVerification {\n    requestEmailVerification\n  }\n": types.RequestEmailVerificationDocument,
    "\n  mutation RequestPasswordReset($email: String!) {\n    requestPasswordReset(email: $email)\n  }\n": types.RequestPasswordResetDocument,
    "\n  mutation ResetPassword($token: String!, $newPassword: String!) {\n    resetPassword(token: $token, newPassword: $newPassword)\n  }\n": types.ResetPasswordDocument,
    "\n  query EmailVerified {\n    viewer { emailVerified }\n  }\n": types.EmailVerifiedDocument,
    "\n  query Viewer {\n    viewer { role platformAdmin user { id email name } tenant { id name } }\n  }\n": types.ViewerDocument,
    "\n  query Conversations {\n    conversations(first: 100) {\n      edges { node { id title mode model createdAt agentic visibility viewerIsOwner } }\n    }\n  }\n": types.ConversationsDocument,
    "\n  query ConversationView($id: ID!) {\n    conversation(id: $id) {\n      id\n      title\n      mode\n      model\n      agentic\n      visibility\n      viewerIsOwner\n      createdAt\n      messages(first: 100) {\n        edges { node { id role content parts createdAt run { id } } }\n        pageInfo { hasNextPage endCursor }\n      }\n      runs(first: 10) {\n        edges { node { ...RunSummary } }\n      }\n    }\n  }\n": types.ConversationViewDocument,
    "\n  query ConversationMessagesAfter($id: ID!, $after: String) {\n    conversation(id: $id) {\n      id\n      messages(first: 100, after: $after) {\n        edges { node { id role content parts createdAt run { id } } }\n        pageInfo { hasNextPage endCursor }\n      }\n    }\n  }\n": types.ConversationMessagesAfterDocument,
    "\n  fragment RunSummary on Run {\n    id\n    kind\n    status\n    turns\n    attempt\n    maxAttempts\n    failureClass\n    error\n    terminationReason\n    inputTokens\n    outputTokens\n    costMicros\n    createdAt\n    startedAt\n    finishedAt\n    toolCalls { id name arguments status risk output error }\n    approvals { id kind status question createdAt expiresAt toolCall { id name arguments risk } }\n  }\n": types.RunSummaryFragmentDoc,
    "\n  mutation CreateConversation($input: CreateConversationInput!) {\n    createConversation(input: $input) { id title mode model agentic createdAt }\n  }\n": types.CreateConversationDocument,
    "\n  mutation UpdateConversation($id: ID!, $input: UpdateConversationInput!) {\n    updateConversation(id: $id, input: $input) { id title mode model agentic }\n  }\n": types.UpdateConversationDocument,
    "\n  mutation SendMessage($input: SendMessageInput!) {\n    sendMessage(input: $input) {\n      message { id role content parts createdAt run { id } }\n      run { ...RunSummary }\n    }\n  }\n": types.SendMessageDocument,
    "\n  subscription RunEvents($runId: ID!, $afterSeq: Int) {\n    runEvents(runId: $runId, afterSeq: $afterSeq) { seq runId type phase data timestamp }\n  }\n": types.RunEventsDocument,
    "\n  mutation SetConversationVisibility($id: ID!, $visibility: ConversationVisibility!) {\n    setConversationVisibility(id: $id, visibility: $visibility) { id visibility viewerIsOwner }\n  }\n": types.SetConversationVisibilityDocument,
    "\n  subscription ConversationEvents($id: ID!) {\n    conversationEvents(conversationId: $id) { seq runId type phase data timestamp }\n  }\n": types.ConversationEventsDocument,
    "\n  mutation CancelRun($id: ID!) { cancelRun(id: $id) { id status } }\n": types.CancelRunDocument,
    "\n  mutation PauseRun($id: ID!) { pauseRun(id: $id) { id status } }\n": types.PauseRunDocument,
    "\n  mutation ResumeRun($id: ID!) { resumeRun(id: $id) { id status } }\n": types.ResumeRunDocument,
    "\n  mutation StopRun($id: ID!) { stopRun(id: $id) { id status } }\n": types.StopRunDocument,
    "\n  mutation ResolveApproval($id: ID!, $decision: ApprovalDecision!, $note: String) {\n    resolveApproval(id: $id, decision: $decision, note: $note) { id status decidedAt }\n  }\n": types.ResolveApprovalDocument,
    "\n  mutation ResolveRollback($id: ID!, $choice: RollbackChoice!) {\n    resolveRollback(approvalId: $id, choice: $choice) { id status note }\n  }\n": types.ResolveRollbackDocument,
    "\n  query Runs($status: [RunStatus!], $kind: [RunKind!], $after: String) {\n    runs(first: 50, status: $status, kind: $kind, after: $after) {\n      edges { node { id kind status turns inputTokens outputTokens costMicros createdAt finishedAt terminationReason failureClass conversation { id title } task { id title } user { id email } } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n": types.RunsDocument,
    "\n  fragment SubagentFields on Subagent {\n    id role goal status priority depth result error failureClass createdAt startedAt finishedAt\n    run { id inputTokens outputTokens }\n    approval { id status expiresAt }\n  }\n": types.SubagentFieldsFragmentDoc,
    "\n  query RunPage($id: ID!) {\n    run(id: $id) {\n      ...RunSummary\n      conversation { id title }\n      task { id title }\n      user { id email }\n      depth\n      parentRun { id kind status }\n      totalInputTokens totalOutputTokens totalCostMicros\n      subagents { ...SubagentFields }\n      events(afterSeq: 0, first: 500) { seq runId type phase data timestamp }\n      team {\n        id goal maxIterations tokenBudget tokensUsed\n        phases {\n          phase iteration attempt model status turns tokens output terminationReason startedAt finishedAt\n          run { id }\n          verdict { verdict summary issues { file problem suggestion } }\n        }\n      }\n    }\n  }\n": types.RunPageDocument,
    "\n  query RunSubagents($id: ID!) {\n    run(id: $id) { id status subagents { ...SubagentFields } }\n  }\n": types.RunSubagentsDocument,
    "\n  mutation CancelSubagent($id: ID!) {\n    cancelSubagent(id: $id) { id status }\n  }\n": types.CancelSubagentDocument,
    "\n  query Tasks {\n    tasks(first: 50) {\n      edges { node { id title description status priority type complexity slug tags createdAt runs(first: 5) { edges { node { id status createdAt costMicros } } } } }\n    }\n  }\n": types.TasksDocument,
    "\n  mutation CreateTask($input: CreateTaskInput!) {\n    createTask(input: $input) { id title status }\n  }\n": types.CreateTaskDocument,
    "\n  mutation RunTask($id: ID!) { runTask(id: $id) { id status } }\n": types.RunTaskDocument,
    "\n  query WorkspaceView {\n    workspace {\n      projectId\n      files { path size version updatedAt versions { version deleted size runId createdAt } }\n      snapshots { id label committed state kind createdAt run { id } }\n    }\n  }\n": types.WorkspaceViewDocument,
    "\n  query WorkspaceFileContent($path: String!) {\n    workspace { projectId file(path: $path) { path size version content updatedAt } }\n  }\n": types.WorkspaceFileContentDocument,
    "\n  query FileDiff($path: String!, $from: Int!, $to: Int!) {\n    fileDiff(path: $path, fromVersion: $from, toVersion: $to)\n  }\n": types.FileDiffDocument,
    "\n  query SnapshotDiff($from: ID!, $to: ID!) {\n    snapshotDiff(from: $from, to: $to)\n  }\n": types.SnapshotDiffDocument,
    "\n  mutation CreateSnapshot($label: String) { createSnapshot(label: $label) { id label } }\n": types.CreateSnapshotDocument,
    "\n  mutation RestoreSnapshot($id: ID!) { restoreSnapshot(id: $id) { id label } }\n": types.RestoreSnapshotDocument,
    "\n  query Settings {\n    agentSettings { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }\n  }\n": types.SettingsDocument,
    "\n  mutation UpdateSettings($input: AgentSettingsInput!) {\n    updateAgentSettings(input: $input) { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }\n  }\n": types.UpdateSettingsDocument,
    "\n  query ApiKeys { apiKeys { id name prefix role createdAt revokedAt } }\n": types.ApiKeysDocument,
    "\n  mutation CreateApiKey($input: CreateApiKeyInput!) {\n    createApiKey(input: $input) { secret apiKey { id name prefix role createdAt revokedAt } }\n  }\n": types.CreateApiKeyDocument,
    "\n  mutation RevokeApiKey($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }\n": types.RevokeApiKeyDocument,
    "\n  mutation AddMember($input: AddMemberInput!) {\n    addMember(input: $input) { role pending invitationToken user { id email name } }\n  }\n": types.AddMemberDocument,
    "\n  query Usage($from: Time!, $to: Time!) {\n    byDay: usageSummary(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }\n    byModel: usageSummary(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }\n    byUser: usageSummary(from: $from, to: $to, groupBy: USER) { key calls inputTokens outputTokens costMicros }\n    byKind: usageSummary(from: $from, to: $to, groupBy: RUN_KIND) { key calls inputTokens outputTokens costMicros }\n    budgets { id scope period tokenLimit costLimitMicros spentTokens spentMicros reservedTokens reservedMicros periodStart user { id email } }\n    activity(first: 10) { edges { node { id kind status inputTokens outputTokens costMicros createdAt user { id email } } } }\n  }\n": types.UsageDocument,
    "\n  mutation SetBudget($input: SetBudgetInput!) { setBudget(input: $input) { id } }\n": types.SetBudgetDocument,
    "\n  mutation DeleteBudget($id: ID!) { deleteBudget(id: $id) }\n": types.DeleteBudgetDocument,
    "\n  query PlatformUsage($from: Time!, $to: Time!) {\n    byTenant: platformUsage(from: $from, to: $to, groupBy: TENANT) { key calls inputTokens outputTokens costMicros }\n    byModel: platformUsage(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }\n    byDay: platformUsage(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }\n  }\n": types.PlatformUsageDocument,
    "\n  query Memberships {\n    viewer { memberships { role pending tenant { id name } } }\n  }\n": types.MembershipsDocument,
    "\n  mutation SwitchTenant($t: String!, $tenantId: ID!) {\n    switchTenant(refreshToken: $t, tenantId: $tenantId) {\n      ...AuthPayloadFields\n    }\n  }\n": types.SwitchTenantDocument,
    "\n  query Members {\n    members(first: 100) {\n      edges { node { role pending joinedAt user { id email name } } }\n    }\n  }\n": types.MembersDocument,
    "\n  fragment RoutineFields on Routine {\n    id\n    name\n    description\n    trigger\n    cron\n    timezone\n    active\n    maxRetries\n    nextFireAt\n    steps { id key name type phase entry role { id name color } }\n    edges { from to condition }\n    runs(first: 5) { id status createdAt }\n  }\n": types.RoutineFieldsFragmentDoc,
    "\n  query Routines {\n    routines { ...RoutineFields }\n  }\n": types.RoutinesDocument,
    "\n  mutation RunRoutine($id: ID!, $input: String) {\n    runRoutine(id: $id, input: $input) { id kind status }\n  }\n": types.RunRoutineDocument,
    "\n  query RoutineRun($runId: ID!) {\n    routineRun(runId: $runId) {\n      currentStep\n      context\n      routine { ...RoutineFields }\n      stepResults { stepKey stepName stepType passed output data inputTokens outputTokens executionCount durationMs roleColor role { id name color } createdAt }\n      metrics { inputTokens outputTokens executions steps { stepKey inputTokens outputTokens executions } }\n    }\n  }\n": types.RoutineRunDocument,
    "\n  query Webhooks {\n    webhooks {\n      id url events active createdAt\n      deliveries(first: 20) { id event status attempts responseCode durationMs error createdAt }\n    }\n  }\n": types.WebhooksDocument,
    "\n  mutation CreateWebhook($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }\n": types.CreateWebhookDocument,
    "\n  mutation DeleteWebhook($id: ID!) { deleteWebhook(id: $id) }\n": types.DeleteWebhookDocument,
    "\n  mutation TestWebhook($id: ID!) { testWebhook(id: $id) { id status } }\n": types.TestWebhookDocument,
    "\n  query PlatformHealth { platformHealth { name status latencyMs error } }\n": types.PlatformHealthDocument,
    "\n  query Plans { plans { name subagentsRunningMax spendRate spendBurst updatedAt } }\n": types.PlansDocument,
    "\n  mutation SetPlan($input: SetPlanInput!) {\n    setPlan(input: $input) { name subagentsRunningMax spendRate spendBurst updatedAt }\n  }\n": types.SetPlanDocument,
    "\n  mutation SetTenantPlan($tenantId: ID!, $plan: String!) {\n    setTenantPlan(tenantId: $tenantId, plan: $plan) { id plan }\n  }\n": types.SetTenantPlanDocument,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 *
 *
 * @example
 * ```ts
 * const query = graphql(`query GetUser($id: ID!) { user(id: $id) { name } }`);
 * ```
 *
 * The query argument is unknown!
 * Please regenerate the types.
 */
export function graphql(source: string): unknown;

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment AuthPayloadFields on AuthPayload {\n    accessToken\n    refreshToken\n    expiresAt\n    viewer { role platformAdmin user { id email name } tenant { id name } }\n  }\n"): (typeof documents)["\n  fragment AuthPayloadFields on AuthPayload {\n    accessToken\n    refreshToken\n    expiresAt\n    viewer { role platformAdmin user { id email name } tenant { id name } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SignUp($input: SignUpInput!) {\n    signUp(input: $input) {\n      ...AuthPayloadFields\n    }\n  }\n"): (typeof documents)["\n  mutation SignUp($input: SignUpInput!) {\n    signUp(input: $input) {\n      ...AuthPayloadFields\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation LogIn($input: LogInInput!) {\n    logIn(input: $input) {\n      ...AuthPayloadFields\n    }\n  }\n"): (typeof documents)["\n  mutation LogIn($input: LogInInput!) {\n    logIn(input: $input) {\n      ...AuthPayloadFields\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RefreshSession($t: String!) {\n    refreshSession(refreshToken: $t) {\n      ...AuthPayloadFields\n    }\n  }\n"): (typeof documents)["\n  mutation RefreshSession($t: String!) {\n    refreshSession(refreshToken: $t) {\n      ...AuthPayloadFields\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation LogOut($t: String!) {\n    logOut(refreshToken: $t)\n  }\n"): (typeof documents)["\n  mutation LogOut($t: String!) {\n    logOut(refreshToken: $t)\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation AcceptInvitation($token: String!) {\n    acceptInvitation(token: $token)\n  }\n"): (typeof documents)["\n  mutation AcceptInvitation($token: String!) {\n    acceptInvitation(token: $token)\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation VerifyEmail($token: String!) {\n    verifyEmail(token: $token)\n  }\n"): (typeof documents)["\n  mutation VerifyEmail($token: String!) {\n    verifyEmail(token: $token)\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RequestEmailVerification {\n    requestEmailVerification\n  }\n"): (typeof documents)["\n  mutation RequestEmailVerification {\n    requestEmailVerification\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RequestPasswordReset($email: String!) {\n    requestPasswordReset(email: $email)\n  }\n"): (typeof documents)["\n  mutation RequestPasswordReset($email: String!) {\n    requestPasswordReset(email: $email)\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ResetPassword($token: String!, $newPassword: String!) {\n    resetPassword(token: $token, newPassword: $newPassword)\n  }\n"): (typeof documents)["\n  mutation ResetPassword($token: String!, $newPassword: String!) {\n    resetPassword(token: $token, newPassword: $newPassword)\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query EmailVerified {\n    viewer { emailVerified }\n  }\n"): (typeof documents)["\n  query EmailVerified {\n    viewer { emailVerified }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Viewer {\n    viewer { role platformAdmin user { id email name } tenant { id name } }\n  }\n"): (typeof documents)["\n  query Viewer {\n    viewer { role platformAdmin user { id email name } tenant { id name } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Conversations {\n    conversations(first: 100) {\n      edges { node { id title mode model createdAt agentic visibility viewerIsOwner } }\n    }\n  }\n"): (typeof documents)["\n  query Conversations {\n    conversations(first: 100) {\n      edges { node { id title mode model createdAt agentic visibility viewerIsOwner } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query ConversationView($id: ID!) {\n    conversation(id: $id) {\n      id\n      title\n      mode\n      model\n      agentic\n      visibility\n      viewerIsOwner\n      createdAt\n      messages(first: 100) {\n        edges { node { id role content parts createdAt run { id } } }\n        pageInfo { hasNextPage endCursor }\n      }\n      runs(first: 10) {\n        edges { node { ...RunSummary } }\n      }\n    }\n  }\n"): (typeof documents)["\n  query ConversationView($id: ID!) {\n    conversation(id: $id) {\n      id\n      title\n      mode\n      model\n      agentic\n      visibility\n      viewerIsOwner\n      createdAt\n      messages(first: 100) {\n        edges { node { id role content parts createdAt run { id } } }\n        pageInfo { hasNextPage endCursor }\n      }\n      runs(first: 10) {\n        edges { node { ...RunSummary } }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query ConversationMessagesAfter($id: ID!, $after: String) {\n    conversation(id: $id) {\n      id\n      messages(first: 100, after: $after) {\n        edges { node { id role content parts createdAt run { id } } }\n        pageInfo { hasNextPage endCursor }\n      }\n    }\n  }\n"): (typeof documents)["\n  query ConversationMessagesAfter($id: ID!, $after: String) {\n    conversation(id: $id) {\n      id\n      messages(first: 100, after: $after) {\n        edges { node { id role content parts createdAt run { id } } }\n        pageInfo { hasNextPage endCursor }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment RunSummary on Run {\n    id\n    kind\n    status\n    turns\n    attempt\n    maxAttempts\n    failureClass\n    error\n    terminationReason\n    inputTokens\n    outputTokens\n    costMicros\n    createdAt\n    startedAt\n    finishedAt\n    toolCalls { id name arguments status risk output error }\n    approvals { id kind status question createdAt expiresAt toolCall { id name arguments risk } }\n  }\n"): (typeof documents)["\n  fragment RunSummary on Run {\n    id\n    kind\n    status\n    turns\n    attempt\n    maxAttempts\n    failureClass\n    error\n    terminationReason\n    inputTokens\n    outputTokens\n    costMicros\n    createdAt\n    startedAt\n    finishedAt\n    toolCalls { id name arguments status risk output error }\n    approvals { id kind status question createdAt expiresAt toolCall { id name arguments risk } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateConversation($input: CreateConversationInput!) {\n    createConversation(input: $input) { id title mode model agentic createdAt }\n  }\n"): (typeof documents)["\n  mutation CreateConversation($input: CreateConversationInput!) {\n    createConversation(input: $input) { id title mode model agentic createdAt }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation UpdateConversation($id: ID!, $input: UpdateConversationInput!) {\n    updateConversation(id: $id, input: $input) { id title mode model agentic }\n  }\n"): (typeof documents)["\n  mutation UpdateConversation($id: ID!, $input: UpdateConversationInput!) {\n    updateConversation(id: $id, input: $input) { id title mode model agentic }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SendMessage($input: SendMessageInput!) {\n    sendMessage(input: $input) {\n      message { id role content parts createdAt run { id } }\n      run { ...RunSummary }\n    }\n  }\n"): (typeof documents)["\n  mutation SendMessage($input: SendMessageInput!) {\n    sendMessage(input: $input) {\n      message { id role content parts createdAt run { id } }\n      run { ...RunSummary }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription RunEvents($runId: ID!, $afterSeq: Int) {\n    runEvents(runId: $runId, afterSeq: $afterSeq) { seq runId type phase data timestamp }\n  }\n"): (typeof documents)["\n  subscription RunEvents($runId: ID!, $afterSeq: Int) {\n    runEvents(runId: $runId, afterSeq: $afterSeq) { seq runId type phase data timestamp }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SetConversationVisibility($id: ID!, $visibility: ConversationVisibility!) {\n    setConversationVisibility(id: $id, visibility: $visibility) { id visibility viewerIsOwner }\n  }\n"): (typeof documents)["\n  mutation SetConversationVisibility($id: ID!, $visibility: ConversationVisibility!) {\n    setConversationVisibility(id: $id, visibility: $visibility) { id visibility viewerIsOwner }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription ConversationEvents($id: ID!) {\n    conversationEvents(conversationId: $id) { seq runId type phase data timestamp }\n  }\n"): (typeof documents)["\n  subscription ConversationEvents($id: ID!) {\n    conversationEvents(conversationId: $id) { seq runId type phase data timestamp }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CancelRun($id: ID!) { cancelRun(id: $id) { id status } }\n"): (typeof documents)["\n  mutation CancelRun($id: ID!) { cancelRun(id: $id) { id status } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation PauseRun($id: ID!) { pauseRun(id: $id) { id status } }\n"): (typeof documents)["\n  mutation PauseRun($id: ID!) { pauseRun(id: $id) { id status } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ResumeRun($id: ID!) { resumeRun(id: $id) { id status } }\n"): (typeof documents)["\n  mutation ResumeRun($id: ID!) { resumeRun(id: $id) { id status } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation StopRun($id: ID!) { stopRun(id: $id) { id status } }\n"): (typeof documents)["\n  mutation StopRun($id: ID!) { stopRun(id: $id) { id status } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ResolveApproval($id: ID!, $decision: ApprovalDecision!, $note: String) {\n    resolveApproval(id: $id, decision: $decision, note: $note) { id status decidedAt }\n  }\n"): (typeof documents)["\n  mutation ResolveApproval($id: ID!, $decision: ApprovalDecision!, $note: String) {\n    resolveApproval(id: $id, decision: $decision, note: $note) { id status decidedAt }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ResolveRollback($id: ID!, $choice: RollbackChoice!) {\n    resolveRollback(approvalId: $id, choice: $choice) { id status note }\n  }\n"): (typeof documents)["\n  mutation ResolveRollback($id: ID!, $choice: RollbackChoice!) {\n    resolveRollback(approvalId: $id, choice: $choice) { id status note }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Runs($status: [RunStatus!], $kind: [RunKind!], $after: String) {\n    runs(first: 50, status: $status, kind: $kind, after: $after) {\n      edges { node { id kind status turns inputTokens outputTokens costMicros createdAt finishedAt terminationReason failureClass conversation { id title } task { id title } user { id email } } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n"): (typeof documents)["\n  query Runs($status: [RunStatus!], $kind: [RunKind!], $after: String) {\n    runs(first: 50, status: $status, kind: $kind, after: $after) {\n      edges { node { id kind status turns inputTokens outputTokens costMicros createdAt finishedAt terminationReason failureClass conversation { id title } task { id title } user { id email } } }\n      pageInfo { hasNextPage endCursor }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment SubagentFields on Subagent {\n    id role goal status priority depth result error failureClass createdAt startedAt finishedAt\n    run { id inputTokens outputTokens }\n    approval { id status expiresAt }\n  }\n"): (typeof documents)["\n  fragment SubagentFields on Subagent {\n    id role goal status priority depth result error failureClass createdAt startedAt finishedAt\n    run { id inputTokens outputTokens }\n    approval { id status expiresAt }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RunPage($id: ID!) {\n    run(id: $id) {\n      ...RunSummary\n      conversation { id title }\n      task { id title }\n      user { id email }\n      depth\n      parentRun { id kind status }\n      totalInputTokens totalOutputTokens totalCostMicros\n      subagents { ...SubagentFields }\n      events(afterSeq: 0, first: 500) { seq runId type phase data timestamp }\n      team {\n        id goal maxIterations tokenBudget tokensUsed\n        phases {\n          phase iteration attempt model status turns tokens output terminationReason startedAt finishedAt\n          run { id }\n          verdict { verdict summary issues { file problem suggestion } }\n        }\n      }\n    }\n  }\n"): (typeof documents)["\n  query RunPage($id: ID!) {\n    run(id: $id) {\n      ...RunSummary\n      conversation { id title }\n      task { id title }\n      user { id email }\n      depth\n      parentRun { id kind status }\n      totalInputTokens totalOutputTokens totalCostMicros\n      subagents { ...SubagentFields }\n      events(afterSeq: 0, first: 500) { seq runId type phase data timestamp }\n      team {\n        id goal maxIterations tokenBudget tokensUsed\n        phases {\n          phase iteration attempt model status turns tokens output terminationReason startedAt finishedAt\n          run { id }\n          verdict { verdict summary issues { file problem suggestion } }\n        }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RunSubagents($id: ID!) {\n    run(id: $id) { id status subagents { ...SubagentFields } }\n  }\n"): (typeof documents)["\n  query RunSubagents($id: ID!) {\n    run(id: $id) { id status subagents { ...SubagentFields } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CancelSubagent($id: ID!) {\n    cancelSubagent(id: $id) { id status }\n  }\n"): (typeof documents)["\n  mutation CancelSubagent($id: ID!) {\n    cancelSubagent(id: $id) { id status }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Tasks {\n    tasks(first: 50) {\n      edges { node { id title description status priority type complexity slug tags createdAt runs(first: 5) { edges { node { id status createdAt costMicros } } } } }\n    }\n  }\n"): (typeof documents)["\n  query Tasks {\n    tasks(first: 50) {\n      edges { node { id title description status priority type complexity slug tags createdAt runs(first: 5) { edges { node { id status createdAt costMicros } } } } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateTask($input: CreateTaskInput!) {\n    createTask(input: $input) { id title status }\n  }\n"): (typeof documents)["\n  mutation CreateTask($input: CreateTaskInput!) {\n    createTask(input: $input) { id title status }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RunTask($id: ID!) { runTask(id: $id) { id status } }\n"): (typeof documents)["\n  mutation RunTask($id: ID!) { runTask(id: $id) { id status } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query WorkspaceView {\n    workspace {\n      projectId\n      files { path size version updatedAt versions { version deleted size runId createdAt } }\n      snapshots { id label committed state kind createdAt run { id } }\n    }\n  }\n"): (typeof documents)["\n  query WorkspaceView {\n    workspace {\n      projectId\n      files { path size version updatedAt versions { version deleted size runId createdAt } }\n      snapshots { id label committed state kind createdAt run { id } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query WorkspaceFileContent($path: String!) {\n    workspace { projectId file(path: $path) { path size version content updatedAt } }\n  }\n"): (typeof documents)["\n  query WorkspaceFileContent($path: String!) {\n    workspace { projectId file(path: $path) { path size version content updatedAt } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query FileDiff($path: String!, $from: Int!, $to: Int!) {\n    fileDiff(path: $path, fromVersion: $from, toVersion: $to)\n  }\n"): (typeof documents)["\n  query FileDiff($path: String!, $from: Int!, $to: Int!) {\n    fileDiff(path: $path, fromVersion: $from, toVersion: $to)\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query SnapshotDiff($from: ID!, $to: ID!) {\n    snapshotDiff(from: $from, to: $to)\n  }\n"): (typeof documents)["\n  query SnapshotDiff($from: ID!, $to: ID!) {\n    snapshotDiff(from: $from, to: $to)\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateSnapshot($label: String) { createSnapshot(label: $label) { id label } }\n"): (typeof documents)["\n  mutation CreateSnapshot($label: String) { createSnapshot(label: $label) { id label } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RestoreSnapshot($id: ID!) { restoreSnapshot(id: $id) { id label } }\n"): (typeof documents)["\n  mutation RestoreSnapshot($id: ID!) { restoreSnapshot(id: $id) { id label } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Settings {\n    agentSettings { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }\n  }\n"): (typeof documents)["\n  query Settings {\n    agentSettings { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation UpdateSettings($input: AgentSettingsInput!) {\n    updateAgentSettings(input: $input) { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }\n  }\n"): (typeof documents)["\n  mutation UpdateSettings($input: AgentSettingsInput!) {\n    updateAgentSettings(input: $input) { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query ApiKeys { apiKeys { id name prefix role createdAt revokedAt } }\n"): (typeof documents)["\n  query ApiKeys { apiKeys { id name prefix role createdAt revokedAt } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateApiKey($input: CreateApiKeyInput!) {\n    createApiKey(input: $input) { secret apiKey { id name prefix role createdAt revokedAt } }\n  }\n"): (typeof documents)["\n  mutation CreateApiKey($input: CreateApiKeyInput!) {\n    createApiKey(input: $input) { secret apiKey { id name prefix role createdAt revokedAt } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RevokeApiKey($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }\n"): (typeof documents)["\n  mutation RevokeApiKey($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation AddMember($input: AddMemberInput!) {\n    addMember(input: $input) { role pending invitationToken user { id email name } }\n  }\n"): (typeof documents)["\n  mutation AddMember($input: AddMemberInput!) {\n    addMember(input: $input) { role pending invitationToken user { id email name } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Usage($from: Time!, $to: Time!) {\n    byDay: usageSummary(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }\n    byModel: usageSummary(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }\n    byUser: usageSummary(from: $from, to: $to, groupBy: USER) { key calls inputTokens outputTokens costMicros }\n    byKind: usageSummary(from: $from, to: $to, groupBy: RUN_KIND) { key calls inputTokens outputTokens costMicros }\n    budgets { id scope period tokenLimit costLimitMicros spentTokens spentMicros reservedTokens reservedMicros periodStart user { id email } }\n    activity(first: 10) { edges { node { id kind status inputTokens outputTokens costMicros createdAt user { id email } } } }\n  }\n"): (typeof documents)["\n  query Usage($from: Time!, $to: Time!) {\n    byDay: usageSummary(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }\n    byModel: usageSummary(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }\n    byUser: usageSummary(from: $from, to: $to, groupBy: USER) { key calls inputTokens outputTokens costMicros }\n    byKind: usageSummary(from: $from, to: $to, groupBy: RUN_KIND) { key calls inputTokens outputTokens costMicros }\n    budgets { id scope period tokenLimit costLimitMicros spentTokens spentMicros reservedTokens reservedMicros periodStart user { id email } }\n    activity(first: 10) { edges { node { id kind status inputTokens outputTokens costMicros createdAt user { id email } } } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SetBudget($input: SetBudgetInput!) { setBudget(input: $input) { id } }\n"): (typeof documents)["\n  mutation SetBudget($input: SetBudgetInput!) { setBudget(input: $input) { id } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation DeleteBudget($id: ID!) { deleteBudget(id: $id) }\n"): (typeof documents)["\n  mutation DeleteBudget($id: ID!) { deleteBudget(id: $id) }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query PlatformUsage($from: Time!, $to: Time!) {\n    byTenant: platformUsage(from: $from, to: $to, groupBy: TENANT) { key calls inputTokens outputTokens costMicros }\n    byModel: platformUsage(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }\n    byDay: platformUsage(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }\n  }\n"): (typeof documents)["\n  query PlatformUsage($from: Time!, $to: Time!) {\n    byTenant: platformUsage(from: $from, to: $to, groupBy: TENANT) { key calls inputTokens outputTokens costMicros }\n    byModel: platformUsage(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }\n    byDay: platformUsage(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Memberships {\n    viewer { memberships { role pending tenant { id name } } }\n  }\n"): (typeof documents)["\n  query Memberships {\n    viewer { memberships { role pending tenant { id name } } }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SwitchTenant($t: String!, $tenantId: ID!) {\n    switchTenant(refreshToken: $t, tenantId: $tenantId) {\n      ...AuthPayloadFields\n    }\n  }\n"): (typeof documents)["\n  mutation SwitchTenant($t: String!, $tenantId: ID!) {\n    switchTenant(refreshToken: $t, tenantId: $tenantId) {\n      ...AuthPayloadFields\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Members {\n    members(first: 100) {\n      edges { node { role pending joinedAt user { id email name } } }\n    }\n  }\n"): (typeof documents)["\n  query Members {\n    members(first: 100) {\n      edges { node { role pending joinedAt user { id email name } } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment RoutineFields on Routine {\n    id\n    name\n    description\n    trigger\n    cron\n    timezone\n    active\n    maxRetries\n    nextFireAt\n    steps { id key name type phase entry role { id name color } }\n    edges { from to condition }\n    runs(first: 5) { id status createdAt }\n  }\n"): (typeof documents)["\n  fragment RoutineFields on Routine {\n    id\n    name\n    description\n    trigger\n    cron\n    timezone\n    active\n    maxRetries\n    nextFireAt\n    steps { id key name type phase entry role { id name color } }\n    edges { from to condition }\n    runs(first: 5) { id status createdAt }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Routines {\n    routines { ...RoutineFields }\n  }\n"): (typeof documents)["\n  query Routines {\n    routines { ...RoutineFields }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RunRoutine($id: ID!, $input: String) {\n    runRoutine(id: $id, input: $input) { id kind status }\n  }\n"): (typeof documents)["\n  mutation RunRoutine($id: ID!, $input: String) {\n    runRoutine(id: $id, input: $input) { id kind status }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query RoutineRun($runId: ID!) {\n    routineRun(runId: $runId) {\n      currentStep\n      context\n      routine { ...RoutineFields }\n      stepResults { stepKey stepName stepType passed output data inputTokens outputTokens executionCount durationMs roleColor role { id name color } createdAt }\n      metrics { inputTokens outputTokens executions steps { stepKey inputTokens outputTokens executions } }\n    }\n  }\n"): (typeof documents)["\n  query RoutineRun($runId: ID!) {\n    routineRun(runId: $runId) {\n      currentStep\n      context\n      routine { ...RoutineFields }\n      stepResults { stepKey stepName stepType passed output data inputTokens outputTokens executionCount durationMs roleColor role { id name color } createdAt }\n      metrics { inputTokens outputTokens executions steps { stepKey inputTokens outputTokens executions } }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Webhooks {\n    webhooks {\n      id url events active createdAt\n      deliveries(first: 20) { id event status attempts responseCode durationMs error createdAt }\n    }\n  }\n"): (typeof documents)["\n  query Webhooks {\n    webhooks {\n      id url events active createdAt\n      deliveries(first: 20) { id event status attempts responseCode durationMs error createdAt }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateWebhook($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }\n"): (typeof documents)["\n  mutation CreateWebhook($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation DeleteWebhook($id: ID!) { deleteWebhook(id: $id) }\n"): (typeof documents)["\n  mutation DeleteWebhook($id: ID!) { deleteWebhook(id: $id) }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation TestWebhook($id: ID!) { testWebhook(id: $id) { id status } }\n"): (typeof documents)["\n  mutation TestWebhook($id: ID!) { testWebhook(id: $id) { id status } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query PlatformHealth { platformHealth { name status latencyMs error } }\n"): (typeof documents)["\n  query PlatformHealth { platformHealth { name status latencyMs error } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Plans { plans { name subagentsRunningMax spendRate spendBurst updatedAt } }\n"): (typeof documents)["\n  query Plans { plans { name subagentsRunningMax spendRate spendBurst updatedAt } }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SetPlan($input: SetPlanInput!) {\n    setPlan(input: $input) { name subagentsRunningMax spendRate spendBurst updatedAt }\n  }\n"): (typeof documents)["\n  mutation SetPlan($input: SetPlanInput!) {\n    setPlan(input: $input) { name subagentsRunningMax spendRate spendBurst updatedAt }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SetTenantPlan($tenantId: ID!, $plan: String!) {\n    setTenantPlan(tenantId: $tenantId, plan: $plan) { id plan }\n  }\n"): (typeof documents)["\n  mutation SetTenantPlan($tenantId: ID!, $plan: String!) {\n    setTenantPlan(tenantId: $tenantId, plan: $plan) { id plan }\n  }\n"];

export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}

export type DocumentType<TDocumentNode extends DocumentNode<any, any>> = TDocumentNode extends DocumentNode<  infer TType,  any>  ? TType  : never;