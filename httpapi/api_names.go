package httpapi

import "github.com/flowd/flowd/api"

// The JSON bodies of the API are defined once, in package api, which the
// Go client shares; these are their names here.
type (
	CreateWorkflowRequest   = api.CreateWorkflowRequest
	ListWorkflowsResponse   = api.ListWorkflowsResponse
	TransitionRequest       = api.TransitionRequest
	CompleteStepRequest     = api.CompleteStepRequest
	RerunRequest            = api.RerunRequest
	BatchStatusRequest      = api.BatchStatusRequest
	BatchStatusResponse     = api.BatchStatusResponse
	HistoryResponse         = api.HistoryResponse
	DefinitionResponse      = api.DefinitionResponse
	ListDefinitionsResponse = api.ListDefinitionsResponse
	PollRequest             = api.PollRequest
	TaskResponse            = api.TaskResponse
	CompleteTaskRequest     = api.CompleteTaskRequest
	CheckpointRequest       = api.CheckpointRequest
	SuspendRequest          = api.SuspendRequest
	SuspendResponse         = api.SuspendResponse
	Wait                    = api.Wait
	ChildWait               = api.ChildWait
	SetVariableRequest      = api.SetVariableRequest
	SetSearchRequest        = api.SetSearchRequest
	FailTaskRequest         = api.FailTaskRequest
	HeartbeatRequest        = api.HeartbeatRequest
	TaskResultResponse      = api.TaskResultResponse
	HeartbeatResponse       = api.HeartbeatResponse
	Worker                  = api.Worker
	ListWorkersResponse     = api.ListWorkersResponse
	ErrorBody               = api.ErrorBody
)

// Constants of the API, as in package api.
const (
	MaxBodyBytes         = api.MaxBodyBytes
	IdempotencyKeyHeader = api.IdempotencyKeyHeader
	OutcomeUnknown       = api.OutcomeUnknown
)

// ETag formats an instance version as a strong entity tag: "4".
func ETag(version int64) string { return api.ETag(version) }

// The bodies of the events and schedules routes, as in package api.
type (
	PublishEventRequest   = api.PublishEventRequest
	PublishEventResponse  = api.PublishEventResponse
	EventFailure          = api.EventFailure
	PutScheduleRequest    = api.PutScheduleRequest
	Schedule              = api.Schedule
	ListSchedulesResponse = api.ListSchedulesResponse
	BackfillRequest       = api.BackfillRequest
	BackfillResponse      = api.BackfillResponse
)
