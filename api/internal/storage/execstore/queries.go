package execstore

// Queries names every SQL constant of the package, and the variants the list builders
// produce; the package test prepares each against the migrated schema, and fails on a SQL
// constant missing here.
var Queries = map[string]string{
	"qExecution":              qExecution,
	"qExecutionWithOutput":    qExecutionWithOutput,
	"qExecutionList":          qExecutionList,
	"qExecutionStatus":        qExecutionStatus,
	"qLogChunks":              qLogChunks,
	"qTargetBySlug":           qTargetBySlug,
	"qTargetByID":             qTargetByID,
	"qGuestHolding":           qGuestHolding,
	"qPendingDuplicate":       qPendingDuplicate,
	"qSessionPendingApproval": qSessionPendingApproval,
	"qOpenAssentWindow":       qOpenAssentWindow,
	"qOpenDestructiveWindow":  qOpenDestructiveWindow,
	"qLockRequest":            qLockRequest,
	"qInsertExecution":        qInsertExecution,
	"qInsertApproval":         qInsertApproval,
	"qSessionTask":            qSessionTask,
	"qUnregisteredPctCreates": qUnregisteredPctCreates,
	"qApproval":               qApproval,
	"qApprovalList":           qApprovalList,
	"qLockDecision":           qLockDecision,
	"qPendingBefore":          qPendingBefore,
	"qDecideApproval":         qDecideApproval,
	"qMoveExecution":          qMoveExecution,
	"qOpenWindow":             qOpenWindow,
	"qCloseWindows":           qCloseWindows,
	"qSessionPlan":            qSessionPlan,

	"qExecutionList/none": first(executionList(ExecutionFilter{}, 50)),
	"qExecutionList/all": first(executionList(ExecutionFilter{Target: "lxc:web", Actions: []string{"run"},
		Statuses: []string{"approved"}, CorrelationID: "c", SessionID: "s", After: &After{ID: "0190b7a4-0000-7000-8000-000000000000"}}, 50)),
	"qExecutionList/target-id": first(executionList(ExecutionFilter{Target: "0190b7a4-0000-7000-8000-000000000000"}, 50)),
	"qApprovalList/none":       first(approvalList(ApprovalFilter{}, 50)),
	"qApprovalList/all": first(approvalList(ApprovalFilter{Statuses: []string{"pending"}, SessionID: "s",
		After: &After{ID: "0190b7a4-0000-7000-8000-000000000000"}}, 50)),
}

func first(sql string, _ []any) string { return sql }
