package workflow

import "github.com/flowd/flowd/workflow/instance"

// The instance data (an instance, its state document, statuses, the
// transition table, the id rules) lives in package workflow/instance, which
// imports nothing heavy, so that API clients and workers can use it without
// linking definitions and their expression language. These are its names
// here, for the code that builds on definitions.
type (
	Instance           = instance.Instance
	State              = instance.State
	StepState          = instance.StepState
	Status             = instance.Status
	StepStatus         = instance.StepStatus
	ParentRef          = instance.ParentRef
	StateTooLargeError = instance.StateTooLargeError
	Edit               = instance.Edit
)

// Instance statuses.
const (
	StatusPending   = instance.StatusPending
	StatusQueued    = instance.StatusQueued
	StatusRunning   = instance.StatusRunning
	StatusPaused    = instance.StatusPaused
	StatusCompleted = instance.StatusCompleted
	StatusFailed    = instance.StatusFailed
	StatusCancelled = instance.StatusCancelled
	StatusTimedOut  = instance.StatusTimedOut
)

// Step statuses.
const (
	StepPending   = instance.StepPending
	StepRunning   = instance.StepRunning
	StepWaiting   = instance.StepWaiting
	StepCompleted = instance.StepCompleted
	StepFailed    = instance.StepFailed
	StepSkipped   = instance.StepSkipped
	StepCancelled = instance.StepCancelled
)

// ServerlessStateKey and MaxIDLength: see package workflow/instance.
const (
	ServerlessStateKey = instance.ServerlessStateKey
	CodeStateKey       = instance.CodeStateKey
	MaxIDLength        = instance.MaxIDLength
)

// Status lists and domain errors: the same values as in workflow/instance.
var (
	Statuses           = instance.Statuses
	StopStatuses       = instance.StopStatuses
	SlotStatuses       = instance.SlotStatuses
	StepStatuses       = instance.StepStatuses
	ActiveStepStatuses = instance.ActiveStepStatuses

	ErrInvalidState      = instance.ErrInvalidState
	ErrInvalidTransition = instance.ErrInvalidTransition
	ErrTerminal          = instance.ErrTerminal
	ErrUnknownStep       = instance.ErrUnknownStep
	ErrStepCompleted     = instance.ErrStepCompleted
	ErrInvalidID         = instance.ErrInvalidID
	ErrStateTooLarge     = instance.ErrStateTooLarge
	ErrInvalidSearch     = instance.ErrInvalidSearch
)

// ParseState is instance.ParseState.
func ParseState(b []byte) (State, error) { return instance.ParseState(b) }

// BeginEdit is instance.BeginEdit.
func BeginEdit(s *State, base int, steps ...string) Edit {
	return instance.BeginEdit(s, base, steps...)
}

// CheckLen is instance.CheckLen.
func CheckLen(n, max int) error { return instance.CheckLen(n, max) }

// ParseStatus is instance.ParseStatus.
func ParseStatus(s string) (Status, error) { return instance.ParseStatus(s) }

// CanTransition is instance.CanTransition.
func CanTransition(from, to Status) bool { return instance.CanTransition(from, to) }

// ValidateInstanceID is instance.ValidateInstanceID.
func ValidateInstanceID(id string) error { return instance.ValidateInstanceID(id) }

// ValidateIDPrefix is instance.ValidateIDPrefix.
func ValidateIDPrefix(prefix string) error { return instance.ValidateIDPrefix(prefix) }

// ValidateDefinitionName is instance.ValidateDefinitionName.
func ValidateDefinitionName(name string) error { return instance.ValidateDefinitionName(name) }

// ValidateStepKey is instance.ValidateStepKey.
func ValidateStepKey(key string) error { return instance.ValidateStepKey(key) }

// ValidateStepID is instance.ValidateStepID.
func ValidateStepID(id string) error { return instance.ValidateStepID(id) }
