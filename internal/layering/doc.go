// Package layering holds the test that checks the package layers
// docs/architecture.md states: which of the module's packages may import
// which. It has no code of its own.
package layering
