// Every GraphQL operation the app sends. GraphQL Code Generator turns each into a typed
// document in src/gql (npm run codegen; make verify checks it is current).
import { graphql } from '../gql';


export const AuthPayloadFields = graphql(`
  fragment AuthPayloadFields on AuthPayload {
    accessToken
    refreshToken
    expiresAt
    viewer { role platformAdmin user { id email name } tenant { id name } }
  }
`);

export const SignUp = graphql(`
  mutation SignUp($input: SignUpInput!) {
    signUp(input: $input) {
      ...AuthPayloadFields
    }
  }
`);

export const LogIn = graphql(`
  mutation LogIn($input: LogInInput!) {
    logIn(input: $input) {
      ...AuthPayloadFields
    }
  }
`);

export const RefreshSession = graphql(`
  mutation RefreshSession($t: String!) {
    refreshSession(refreshToken: $t) {
      ...AuthPayloadFields
    }
  }
`);

export const LogOut = graphql(`
  mutation LogOut($t: String!) {
    logOut(refreshToken: $t)
  }
`);

export const AcceptInvitation = graphql(`
  mutation AcceptInvitation($token: String!) {
    acceptInvitation(token: $token)
  }
`);

export const VerifyEmail = graphql(`
  mutation VerifyEmail($token: String!) {
    verifyEmail(token: $token)
  }
`);

export const RequestEmailVerification = graphql(`
  mutation RequestEmailVerification {
    requestEmailVerification
  }
`);

export const RequestPasswordReset = graphql(`
  mutation RequestPasswordReset($email: String!) {
    requestPasswordReset(email: $email)
  }
`);

export const ResetPassword = graphql(`
  mutation ResetPassword($token: String!, $newPassword: String!) {
    resetPassword(token: $token, newPassword: $newPassword)
  }
`);

export const EmailVerified = graphql(`
  query EmailVerified {
    viewer { emailVerified }
  }
`);

export const Viewer = graphql(`
  query Viewer {
    viewer { role platformAdmin user { id email name } tenant { id name } }
  }
`);

export const Conversations = graphql(`
  query Conversations {
    conversations(first: 100) {
      edges { node { id title mode model createdAt agentic visibility viewerIsOwner } }
    }
  }
`);

export const ConversationView = graphql(`
  query ConversationView($id: ID!) {
    conversation(id: $id) {
      id
      title
      mode
      model
      agentic
      visibility
      viewerIsOwner
      createdAt
      messages(first: 100) {
        edges { node { id role content parts createdAt run { id } } }
        pageInfo { hasNextPage endCursor }
      }
      runs(first: 10) {
        edges { node { ...RunSummary } }
      }
    }
  }
`);

export const ConversationMessagesAfter = graphql(`
  query ConversationMessagesAfter($id: ID!, $after: String) {
    conversation(id: $id) {
      id
      messages(first: 100, after: $after) {
        edges { node { id role content parts createdAt run { id } } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
`);

export const RunSummary = graphql(`
  fragment RunSummary on Run {
    id
    kind
    status
    turns
    attempt
    maxAttempts
    failureClass
    error
    terminationReason
    inputTokens
    outputTokens
    costMicros
    createdAt
    startedAt
    finishedAt
    toolCalls { id name arguments status risk output error }
    approvals { id kind status question createdAt expiresAt toolCall { id name arguments risk } }
  }
`);

export const CreateConversation = graphql(`
  mutation CreateConversation($input: CreateConversationInput!) {
    createConversation(input: $input) { id title mode model agentic createdAt }
  }
`);

export const UpdateConversation = graphql(`
  mutation UpdateConversation($id: ID!, $input: UpdateConversationInput!) {
    updateConversation(id: $id, input: $input) { id title mode model agentic }
  }
`);

export const SendMessage = graphql(`
  mutation SendMessage($input: SendMessageInput!) {
    sendMessage(input: $input) {
      message { id role content parts createdAt run { id } }
      run { ...RunSummary }
    }
  }
`);

export const RunEvents = graphql(`
  subscription RunEvents($runId: ID!, $afterSeq: Int) {
    runEvents(runId: $runId, afterSeq: $afterSeq) { seq runId type phase data timestamp }
  }
`);

export const SetConversationVisibility = graphql(`
  mutation SetConversationVisibility($id: ID!, $visibility: ConversationVisibility!) {
    setConversationVisibility(id: $id, visibility: $visibility) { id visibility viewerIsOwner }
  }
`);

export const ConversationEvents = graphql(`
  subscription ConversationEvents($id: ID!) {
    conversationEvents(conversationId: $id) { seq runId type phase data timestamp }
  }
`);

export const CancelRun = graphql(`
  mutation CancelRun($id: ID!) { cancelRun(id: $id) { id status } }
`);
export const PauseRun = graphql(`
  mutation PauseRun($id: ID!) { pauseRun(id: $id) { id status } }
`);
export const ResumeRun = graphql(`
  mutation ResumeRun($id: ID!) { resumeRun(id: $id) { id status } }
`);
export const StopRun = graphql(`
  mutation StopRun($id: ID!) { stopRun(id: $id) { id status } }
`);

export const ResolveApproval = graphql(`
  mutation ResolveApproval($id: ID!, $decision: ApprovalDecision!, $note: String) {
    resolveApproval(id: $id, decision: $decision, note: $note) { id status decidedAt }
  }
`);

export const ResolveRollback = graphql(`
  mutation ResolveRollback($id: ID!, $choice: RollbackChoice!) {
    resolveRollback(approvalId: $id, choice: $choice) { id status note }
  }
`);

export const Runs = graphql(`
  query Runs($status: [RunStatus!], $kind: [RunKind!], $after: String) {
    runs(first: 50, status: $status, kind: $kind, after: $after) {
      edges { node { id kind status turns inputTokens outputTokens costMicros createdAt finishedAt terminationReason failureClass conversation { id title } task { id title } user { id email } } }
      pageInfo { hasNextPage endCursor }
    }
  }
`);

export const SubagentFields = graphql(`
  fragment SubagentFields on Subagent {
    id role goal status priority depth result error failureClass createdAt startedAt finishedAt
    run { id inputTokens outputTokens }
    approval { id status expiresAt }
  }
`);

export const RunPage = graphql(`
  query RunPage($id: ID!) {
    run(id: $id) {
      ...RunSummary
      conversation { id title }
      task { id title }
      user { id email }
      depth
      parentRun { id kind status }
      totalInputTokens totalOutputTokens totalCostMicros
      subagents { ...SubagentFields }
      events(afterSeq: 0, first: 500) { seq runId type phase data timestamp }
      team {
        id goal maxIterations tokenBudget tokensUsed
        phases {
          phase iteration attempt model status turns tokens output terminationReason startedAt finishedAt
          run { id }
          verdict { verdict summary issues { file problem suggestion } }
        }
      }
    }
  }
`);

export const RunSubagents = graphql(`
  query RunSubagents($id: ID!) {
    run(id: $id) { id status subagents { ...SubagentFields } }
  }
`);

export const CancelSubagent = graphql(`
  mutation CancelSubagent($id: ID!) {
    cancelSubagent(id: $id) { id status }
  }
`);

export const Tasks = graphql(`
  query Tasks {
    tasks(first: 50) {
      edges { node { id title description status priority type complexity slug tags createdAt runs(first: 5) { edges { node { id status createdAt costMicros } } } } }
    }
  }
`);

export const CreateTask = graphql(`
  mutation CreateTask($input: CreateTaskInput!) {
    createTask(input: $input) { id title status }
  }
`);

export const RunTask = graphql(`
  mutation RunTask($id: ID!) { runTask(id: $id) { id status } }
`);

export const WorkspaceView = graphql(`
  query WorkspaceView {
    workspace {
      projectId
      files { path size version updatedAt versions { version deleted size runId createdAt } }
      snapshots { id label committed state kind createdAt run { id } }
    }
  }
`);

export const WorkspaceFileContent = graphql(`
  query WorkspaceFileContent($path: String!) {
    workspace { projectId file(path: $path) { path size version content updatedAt } }
  }
`);

export const FileDiff = graphql(`
  query FileDiff($path: String!, $from: Int!, $to: Int!) {
    fileDiff(path: $path, fromVersion: $from, toVersion: $to)
  }
`);

export const SnapshotDiff = graphql(`
  query SnapshotDiff($from: ID!, $to: ID!) {
    snapshotDiff(from: $from, to: $to)
  }
`);

export const CreateSnapshot = graphql(`
  mutation CreateSnapshot($label: String) { createSnapshot(label: $label) { id label } }
`);

export const RestoreSnapshot = graphql(`
  mutation RestoreSnapshot($id: ID!) { restoreSnapshot(id: $id) { id label } }
`);

export const Settings = graphql(`
  query Settings {
    agentSettings { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }
  }
`);

export const UpdateSettings = graphql(`
  mutation UpdateSettings($input: AgentSettingsInput!) {
    updateAgentSettings(input: $input) { personality verbosity autoExecute approvalThreshold maxTokensPerTask maxRetries timeoutSeconds contextStrategy subagentApproval team { maxIterations timeoutMinutes tokenBudget architectMaxTurns executorMaxTurns reviewerMaxTurns } }
  }
`);

export const ApiKeys = graphql(`
  query ApiKeys { apiKeys { id name prefix role createdAt revokedAt } }
`);

export const CreateApiKey = graphql(`
  mutation CreateApiKey($input: CreateApiKeyInput!) {
    createApiKey(input: $input) { secret apiKey { id name prefix role createdAt revokedAt } }
  }
`);

export const RevokeApiKey = graphql(`
  mutation RevokeApiKey($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }
`);

export const AddMember = graphql(`
  mutation AddMember($input: AddMemberInput!) {
    addMember(input: $input) { role pending invitationToken user { id email name } }
  }
`);

export const Usage = graphql(`
  query Usage($from: Time!, $to: Time!) {
    byDay: usageSummary(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }
    byModel: usageSummary(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }
    byUser: usageSummary(from: $from, to: $to, groupBy: USER) { key calls inputTokens outputTokens costMicros }
    byKind: usageSummary(from: $from, to: $to, groupBy: RUN_KIND) { key calls inputTokens outputTokens costMicros }
    budgets { id scope period tokenLimit costLimitMicros spentTokens spentMicros reservedTokens reservedMicros periodStart user { id email } }
    activity(first: 10) { edges { node { id kind status inputTokens outputTokens costMicros createdAt user { id email } } } }
  }
`);

export const SetBudget = graphql(`
  mutation SetBudget($input: SetBudgetInput!) { setBudget(input: $input) { id } }
`);

export const DeleteBudget = graphql(`
  mutation DeleteBudget($id: ID!) { deleteBudget(id: $id) }
`);

export const PlatformUsage = graphql(`
  query PlatformUsage($from: Time!, $to: Time!) {
    byTenant: platformUsage(from: $from, to: $to, groupBy: TENANT) { key calls inputTokens outputTokens costMicros }
    byModel: platformUsage(from: $from, to: $to, groupBy: MODEL) { key calls inputTokens outputTokens costMicros }
    byDay: platformUsage(from: $from, to: $to, groupBy: DAY) { key calls inputTokens outputTokens costMicros }
  }
`);

export const Memberships = graphql(`
  query Memberships {
    viewer { memberships { role pending tenant { id name } } }
  }
`);

export const SwitchTenant = graphql(`
  mutation SwitchTenant($t: String!, $tenantId: ID!) {
    switchTenant(refreshToken: $t, tenantId: $tenantId) {
      ...AuthPayloadFields
    }
  }
`);

export const Members = graphql(`
  query Members {
    members(first: 100) {
      edges { node { role pending joinedAt user { id email name } } }
    }
  }
`);

export const RoutineFields = graphql(`
  fragment RoutineFields on Routine {
    id
    name
    description
    trigger
    cron
    timezone
    active
    maxRetries
    nextFireAt
    steps { id key name type phase entry role { id name color } }
    edges { from to condition }
    runs(first: 5) { id status createdAt }
  }
`);

export const Routines = graphql(`
  query Routines {
    routines { ...RoutineFields }
  }
`);

export const RunRoutine = graphql(`
  mutation RunRoutine($id: ID!, $input: String) {
    runRoutine(id: $id, input: $input) { id kind status }
  }
`);

export const RoutineRunQuery = graphql(`
  query RoutineRun($runId: ID!) {
    routineRun(runId: $runId) {
      currentStep
      context
      routine { ...RoutineFields }
      stepResults { stepKey stepName stepType passed output data inputTokens outputTokens executionCount durationMs roleColor role { id name color } createdAt }
      metrics { inputTokens outputTokens executions steps { stepKey inputTokens outputTokens executions } }
    }
  }
`);
export const Webhooks = graphql(`
  query Webhooks {
    webhooks {
      id url events active createdAt
      deliveries(first: 20) { id event status attempts responseCode durationMs error createdAt }
    }
  }
`);

export const CreateWebhook = graphql(`
  mutation CreateWebhook($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }
`);

export const DeleteWebhook = graphql(`
  mutation DeleteWebhook($id: ID!) { deleteWebhook(id: $id) }
`);

export const TestWebhook = graphql(`
  mutation TestWebhook($id: ID!) { testWebhook(id: $id) { id status } }
`);

export const PlatformHealth = graphql(`
  query PlatformHealth { platformHealth { name status latencyMs error } }
`);

export const Plans = graphql(`
  query Plans { plans { name subagentsRunningMax spendRate spendBurst updatedAt } }
`);

export const SetPlan = graphql(`
  mutation SetPlan($input: SetPlanInput!) {
    setPlan(input: $input) { name subagentsRunningMax spendRate spendBurst updatedAt }
  }
`);

export const SetTenantPlan = graphql(`
  mutation SetTenantPlan($tenantId: ID!, $plan: String!) {
    setTenantPlan(tenantId: $tenantId, plan: $plan) { id plan }
  }
`);
