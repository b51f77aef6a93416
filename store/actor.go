package store

import "context"

// Every history row records its actor: who asked for the change. A request
// made with an API token is its token's name; the writes the engine makes
// on its own (steps run in process, timers, sweeps, schedules) are
// ActorEngine's. The actor travels with the context of the request, down
// to the store's writes, which record it in the same statement as the rest
// of the row.
const (
	// ActorEngine is the actor of the engine's own writes, and of every
	// write made with a context that carries no actor.
	ActorEngine = "engine"
	// ActorAnonymous is the actor of the API's requests on a server
	// without tokens: nobody in particular.
	ActorAnonymous = "anonymous"
	// ActorUnknown is the actor of the history rows written before flowd
	// recorded actors.
	ActorUnknown = "unknown"
)

type actorKey struct{}

// WithActor returns ctx carrying actor, the actor of the writes made under
// it.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor ctx carries, or ActorEngine.
func ActorFrom(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return ActorEngine
}

// WriteActor is the actor a store records for a write made under ctx:
// own when set (the Actor of a Write or CreateParams, which the engine sets
// on writes it carries away from their request's context, such as those it
// gathers into one ApplyGroup), else ctx's.
func WriteActor(ctx context.Context, own string) string {
	if own != "" {
		return own
	}
	return ActorFrom(ctx)
}
