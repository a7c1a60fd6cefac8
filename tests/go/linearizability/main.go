// Command linearizability checks a history of generation compare-and-set operations on
// Osprey records for per-key linearizability, with Porcupine.
//
// Each key is a register whose state is (exists, value, generation). The operations:
//
//   - read returns (found, value, generation);
//   - cas(generation, value) is a write with the generation policy EQ: it succeeds iff the
//     record's generation equals `generation` (as in Aerospike and Osprey, a record that does
//     not exist skips the check and is created with generation 1), and then stores `value`
//     with the generation one higher (wrapping from 65535 to 1). A definite GENERATION_ERROR
//     is an observed output: the model must place the operation where the generation differed;
//   - write(value) is an unconditional write: it stores `value`, generation one higher.
//
// An operation whose outcome is unknown (a timeout, an in-doubt error) is modelled the Porcupine
// way: its return time is infinite and its output unknown, so it may take effect at any point
// after its call, or never (which is the same as taking effect after every other operation). A
// read without a result tells nothing and is dropped; a write or cas that definitely failed
// for another reason than the generation took no effect.
//
// Input: a JSON array of operations,
//
//	{"client": 3, "key": "r1", "kind": "cas", "input": {"generation": 4, "value": 17},
//	 "output": {"ok": false, "error": "generation"},
//	 "call_ns": 1000, "return_ns": 2000, "unknown": false}
//
// with read outputs {"found": true, "value": 17, "generation": 5}, write and cas outputs
// {"ok": true} or {"ok": false, "error": "generation" | <any other error>}, and "output"
// omitted or ignored when "unknown" is true.
//
// Usage: linearizability [-visualize out.html] [-timeout 60s] history.json
//
// Exit status: 0 linearizable, 1 a key is not linearizable (printed, and drawn to the
// -visualize file), 2 bad input, 3 undecided within -timeout.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	exitLinearizable = 0
	exitViolation    = 1
	exitBadInput     = 2
	exitUndecided    = 3

	generationMax = math.MaxUint16
	returnUnknown = math.MaxInt64
)

// operationKind names what an operation did to its register.
type operationKind string

const (
	kindRead  operationKind = "read"
	kindCas   operationKind = "cas"
	kindWrite operationKind = "write"
)

// historyEntry is one operation as the JSON history records it.
type historyEntry struct {
	Client   int             `json:"client"`
	Key      string          `json:"key"`
	Kind     operationKind   `json:"kind"`
	Input    json.RawMessage `json:"input"`
	Output   json.RawMessage `json:"output"`
	CallNs   int64           `json:"call_ns"`
	ReturnNs int64           `json:"return_ns"`
	Unknown  bool            `json:"unknown"`
}

type entryInput struct {
	Generation *int64 `json:"generation"`
	Value      *int64 `json:"value"`
}

type entryOutput struct {
	Ok         *bool  `json:"ok"`
	Error      string `json:"error"`
	Found      *bool  `json:"found"`
	Value      int64  `json:"value"`
	Generation int64  `json:"generation"`
}

// registerInput is an operation's input in the model.
type registerInput struct {
	key        string
	kind       operationKind
	generation int64
	value      int64
}

// registerOutput is an operation's observed outcome in the model.
type registerOutput struct {
	unknown         bool
	ok              bool
	generationError bool
	found           bool
	value           int64
	generation      int64
}

// registerState is one key's record.
type registerState struct {
	exists     bool
	value      int64
	generation int64
}

func nextGeneration(generation int64) int64 {
	if generation >= generationMax {
		return 1
	}
	return generation + 1
}

// stepRead: a read must see the state as it is.
func stepRead(state registerState, output registerOutput) (bool, interface{}) {
	if !output.found {
		return !state.exists, state
	}
	matches := state.exists && state.value == output.value && state.generation == output.generation
	return matches, state
}

// stepWrite: an unconditional write that succeeded, or may have, takes effect.
func stepWrite(state registerState, input registerInput, output registerOutput) (bool, interface{}) {
	if !output.ok && !output.unknown {
		return true, state
	}
	return true, registerState{exists: true, value: input.value, generation: nextGeneration(state.generation)}
}

// stepCas: a generation compare-and-set.
func stepCas(state registerState, input registerInput, output registerOutput) (bool, interface{}) {
	generationMatches := !state.exists || state.generation == input.generation
	applied := registerState{exists: true, value: input.value, generation: nextGeneration(state.generation)}
	switch {
	case output.ok:
		return generationMatches, applied
	case output.generationError:
		return !generationMatches, state
	case output.unknown:
		if generationMatches {
			return true, applied
		}
		return true, state
	default:
		return true, state
	}
}

func step(state, input, output interface{}) (bool, interface{}) {
	register := state.(registerState)
	in := input.(registerInput)
	out := output.(registerOutput)
	switch in.kind {
	case kindRead:
		return stepRead(register, out)
	case kindWrite:
		return stepWrite(register, in, out)
	default:
		return stepCas(register, in, out)
	}
}

func describeOperation(input, output interface{}) string {
	in := input.(registerInput)
	out := output.(registerOutput)
	var call string
	switch in.kind {
	case kindRead:
		call = "read()"
	case kindWrite:
		call = fmt.Sprintf("write(%d)", in.value)
	default:
		call = fmt.Sprintf("cas(gen=%d, %d)", in.generation, in.value)
	}
	switch {
	case out.unknown:
		return call + " -> unknown"
	case in.kind == kindRead && out.found:
		return fmt.Sprintf("%s -> %d (gen %d)", call, out.value, out.generation)
	case in.kind == kindRead:
		return call + " -> not found"
	case out.ok:
		return call + " -> ok"
	case out.generationError:
		return call + " -> generation error"
	default:
		return call + " -> failed"
	}
}

func describeState(state interface{}) string {
	register := state.(registerState)
	if !register.exists {
		return "absent"
	}
	return fmt.Sprintf("%d (gen %d)", register.value, register.generation)
}

// registerModel is the model of one key; partitionByKey lets it check several keys at once.
func registerModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() interface{} { return registerState{} },
		Step:      step,
		Equal:     func(a, b interface{}) bool { return a.(registerState) == b.(registerState) },
		Hash: func(state interface{}) uint64 {
			register := state.(registerState)
			hash := uint64(register.value)*1_000_003 ^ uint64(register.generation)<<1
			if register.exists {
				hash ^= 1
			}
			return hash
		},
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
	}
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	for _, operation := range history {
		key := operation.Input.(registerInput).key
		byKey[key] = append(byKey[key], operation)
	}
	keys := sortedKeys(byKey)
	partitions := make([][]porcupine.Operation, 0, len(keys))
	for _, key := range keys {
		partitions = append(partitions, byKey[key])
	}
	return partitions
}

func sortedKeys(byKey map[string][]porcupine.Operation) []string {
	keys := make([]string, 0, len(byKey))
	for key := range byKey {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// parseHistory decodes and validates the JSON history.
func parseHistory(reader io.Reader) ([]historyEntry, error) {
	decoder := json.NewDecoder(reader)
	decoder.DisallowUnknownFields()
	var entries []historyEntry
	if err := decoder.Decode(&entries); err != nil {
		return nil, fmt.Errorf("not a JSON array of operations: %w", err)
	}
	for index, entry := range entries {
		if err := validateEntry(entry); err != nil {
			return nil, fmt.Errorf("operation %d: %w", index, err)
		}
	}
	return entries, nil
}

func validateEntry(entry historyEntry) error {
	switch {
	case entry.Key == "":
		return errors.New("no key")
	case entry.Client < 0:
		return errors.New("negative client id")
	case entry.Kind != kindRead && entry.Kind != kindCas && entry.Kind != kindWrite:
		return fmt.Errorf("kind %q is none of read, cas, write", entry.Kind)
	case entry.CallNs < 0:
		return errors.New("negative call_ns")
	case !entry.Unknown && entry.ReturnNs < entry.CallNs:
		return errors.New("return_ns before call_ns")
	}
	return nil
}

func decodeStrict(raw json.RawMessage, target interface{}) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	decoder := json.NewDecoder(strings.NewReader(string(raw)))
	decoder.DisallowUnknownFields()
	return decoder.Decode(target)
}

// toOperation turns one entry into Porcupine's form; ok is false for a read without a result.
func toOperation(entry historyEntry, clientIndex int) (porcupine.Operation, bool, error) {
	var input entryInput
	var output entryOutput
	if err := decodeStrict(entry.Input, &input); err != nil {
		return porcupine.Operation{}, false, fmt.Errorf("input: %w", err)
	}
	if !entry.Unknown {
		if err := decodeStrict(entry.Output, &output); err != nil {
			return porcupine.Operation{}, false, fmt.Errorf("output: %w", err)
		}
	}
	modelInput, err := toInput(entry, input)
	if err != nil {
		return porcupine.Operation{}, false, err
	}
	modelOutput, err := toOutput(entry, output)
	if err != nil {
		return porcupine.Operation{}, false, err
	}
	if entry.Kind == kindRead && entry.Unknown {
		return porcupine.Operation{}, false, nil
	}
	returnNs := entry.ReturnNs
	if entry.Unknown {
		returnNs = returnUnknown
	}
	operation := porcupine.Operation{
		ClientId: clientIndex,
		Input:    modelInput,
		Call:     entry.CallNs,
		Output:   modelOutput,
		Return:   returnNs,
		Metadata: fmt.Sprintf("key %s, client %d", entry.Key, entry.Client),
	}
	return operation, true, nil
}

func toInput(entry historyEntry, input entryInput) (registerInput, error) {
	modelInput := registerInput{key: entry.Key, kind: entry.Kind}
	if entry.Kind == kindCas {
		if input.Generation == nil {
			return modelInput, errors.New("cas without input.generation")
		}
		modelInput.generation = *input.Generation
	}
	if entry.Kind != kindRead {
		if input.Value == nil {
			return modelInput, fmt.Errorf("%s without input.value", entry.Kind)
		}
		modelInput.value = *input.Value
	}
	return modelInput, nil
}

func toOutput(entry historyEntry, output entryOutput) (registerOutput, error) {
	if entry.Unknown {
		return registerOutput{unknown: true}, nil
	}
	if entry.Kind == kindRead {
		if output.Found == nil {
			return registerOutput{}, errors.New("read without output.found")
		}
		return registerOutput{found: *output.Found, value: output.Value, generation: output.Generation}, nil
	}
	if output.Ok == nil {
		return registerOutput{}, fmt.Errorf("%s without output.ok (or unknown: true)", entry.Kind)
	}
	generationError := !*output.Ok && output.Error == "generation"
	return registerOutput{ok: *output.Ok, generationError: generationError}, nil
}

// toOperations groups the history's operations by key, clients numbered from zero.
func toOperations(entries []historyEntry) (map[string][]porcupine.Operation, error) {
	clientIndex := map[int]int{}
	byKey := map[string][]porcupine.Operation{}
	for index, entry := range entries {
		if _, seen := clientIndex[entry.Client]; !seen {
			clientIndex[entry.Client] = len(clientIndex)
		}
		operation, kept, err := toOperation(entry, clientIndex[entry.Client])
		if err != nil {
			return nil, fmt.Errorf("operation %d: %w", index, err)
		}
		if kept {
			byKey[entry.Key] = append(byKey[entry.Key], operation)
		}
	}
	return byKey, nil
}

// verdict is the outcome of checking every key.
type verdict struct {
	violations []string
	undecided  []string
}

func checkKeys(byKey map[string][]porcupine.Operation, timeout time.Duration) verdict {
	var result verdict
	model := registerModel()
	for _, key := range sortedKeys(byKey) {
		switch porcupine.CheckOperationsTimeout(model, byKey[key], timeout) {
		case porcupine.Illegal:
			result.violations = append(result.violations, key)
		case porcupine.Unknown:
			result.undecided = append(result.undecided, key)
		}
	}
	return result
}

// visualize draws the histories of `keys`, with the longest linearizations found, to `path`.
func visualize(byKey map[string][]porcupine.Operation, keys []string, path string, timeout time.Duration) error {
	var operations []porcupine.Operation
	for _, key := range keys {
		operations = append(operations, byKey[key]...)
	}
	model := registerModel()
	_, info := porcupine.CheckOperationsVerbose(model, operations, timeout)
	return porcupine.VisualizePath(model, info, path)
}

func countOperations(byKey map[string][]porcupine.Operation) (total, unknown int) {
	for _, operations := range byKey {
		for _, operation := range operations {
			total++
			if operation.Output.(registerOutput).unknown {
				unknown++
			}
		}
	}
	return total, unknown
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("linearizability", flag.ContinueOnError)
	flags.SetOutput(stderr)
	visualizePath := flags.String("visualize", "", "write an HTML drawing of the failing keys here")
	timeout := flags.Duration("timeout", 60*time.Second, "give up on one key after this long (exit 3)")
	if err := flags.Parse(args); err != nil || flags.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: linearizability [-visualize out.html] [-timeout 60s] history.json")
		return exitBadInput
	}
	byKey, err := loadHistory(flags.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "bad history: %v\n", err)
		return exitBadInput
	}
	total, unknown := countOperations(byKey)
	fmt.Fprintf(stdout, "%d keys, %d operations (%d with unknown outcome)\n", len(byKey), total, unknown)
	result := checkKeys(byKey, *timeout)
	if len(result.violations) > 0 {
		return reportViolations(byKey, result.violations, *visualizePath, *timeout, stdout, stderr)
	}
	if len(result.undecided) > 0 {
		fmt.Fprintf(stdout, "undecided within %s: keys %s\n", *timeout, strings.Join(result.undecided, ", "))
		return exitUndecided
	}
	fmt.Fprintln(stdout, "linearizable")
	return exitLinearizable
}

func loadHistory(path string) (map[string][]porcupine.Operation, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	entries, err := parseHistory(file)
	if err != nil {
		return nil, err
	}
	return toOperations(entries)
}

func reportViolations(byKey map[string][]porcupine.Operation, keys []string, path string,
	timeout time.Duration, stdout, stderr io.Writer) int {
	for _, key := range keys {
		fmt.Fprintf(stdout, "NOT linearizable: key %s (%d operations)\n", key, len(byKey[key]))
	}
	if path != "" {
		if err := visualize(byKey, keys, path, timeout); err != nil {
			fmt.Fprintf(stderr, "cannot write the visualization: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "visualization: %s\n", path)
		}
	}
	return exitViolation
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
