package storage

import "time"

// Queries names every SQL constant of the package, and the variants of the statement
// ListSessions builds; storage_test.go prepares each against the migrated schema, and fails
// on a SQL constant missing here.
var Queries = map[string]string{
	"qActivityOf":          qActivityOf,
	"qAddMessage":          qAddMessage,
	"qAppendMessage":       qAppendMessage,
	"qAwaitingApproval":    qAwaitingApproval,
	"qCloseSteps":          qCloseSteps,
	"qDeleteEmpty":         qDeleteEmpty,
	"qDeleteSession":       qDeleteSession,
	"qEnsureSession":       qEnsureSession,
	"qFinishMessage":       qFinishMessage,
	"qFinishToolCall":      qFinishToolCall,
	"qGetSession":          qGetSession,
	"qGetSessionForUpdate": qGetSessionForUpdate,
	"qHandedOff":           qHandedOff,
	"qHasLivePlan":         qHasLivePlan,
	"qHistoryMessages":     qHistoryMessages,
	"qHistoryCalls":        qHistoryCalls,
	"qIdleSessions":        qIdleSessions,
	"qInsertActivity":      qInsertActivity,
	"qInsertQuestion":      qInsertQuestion,
	"qInsertSteps":         qInsertSteps,
	"qInterruptStreaming":  qInterruptStreaming,
	"qLastAssistantText":   qLastAssistantText,
	"qLastUserAt":          qLastUserAt,
	"qListSessions":        qListSessions,
	"qListSessions/page":   listSessionsVariant(SessionFilter{}),
	"qListSessions/all": listSessionsVariant(SessionFilter{Outcomes: []string{"ok"}, Statuses: []string{"failed"},
		Blockers: []string{"approval"}, Entity: "0190d8a0-0000-7000-8000-000000000000", Since: time.Unix(0, 0),
		After: &SessionCursor{CreatedAt: time.Unix(0, 0), ID: "x"}}),
	"qListSessions/entity-slug": listSessionsVariant(SessionFilter{Entity: "host:pve"}),
	"qPriorTasks":               qPriorTasks,
	"qReadSnapshot":             qReadSnapshot,
	"qReplaceSteps":             qReplaceSteps,
	"qReported":                 qReported,
	"qSaveSession":              qSaveSession,
	"qSealedSecret":             qSealedSecret,
	"qSecretNames":              qSecretNames,
	"qSetStep":                  qSetStep,
	"qStartAssistant":           qStartAssistant,
	"qStartToolCall":            qStartToolCall,
	"qSteps":                    qSteps,
	"qToolCalls":                qToolCalls,
	"qToolResult":               qToolResult,
	"qTouch":                    qTouch,
	"qTranscript":               qTranscript,
}

func listSessionsVariant(f SessionFilter) string {
	sql, _ := listSessionsQuery(f, DefaultSessionLimit)
	return sql
}
