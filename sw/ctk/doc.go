// Package ctk holds no code: its tests run the conformance kit (CTK) of the
// Serverless Workflow specification — the Gherkin features under
// testdata/features, as published with the specification — against flowd's
// API and engine on both stores, plus a crash-resume test of a Serverless
// Workflow instance.
package ctk
