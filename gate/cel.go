package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// MaxCost is the CEL cost limit of one evaluation of a rule's when: past
// it the evaluation stops with an error and the rule fires. Simple
// comparisons cost a handful; the limit is there for comprehensions over
// large arguments or nested macros, which would otherwise hold a worker.
const MaxCost = 1_000_000

// interruptEvery is how many comprehension iterations run between checks
// of the evaluation's ctx.
const interruptEvery = 100

// variables are the names a when expression may use, for error messages;
// editVariables those of an editWhen.
const (
	variables     = "tool, server, args, agent, conversationId and context"
	editVariables = "tool, server, args (the edited args), requested (the args asked for), agent, conversationId and context"
)

// newEnv returns the CEL environment of when expressions: the standard
// library, the request's fields as variables, and comparisons across int,
// uint and double (JSON numbers arrive as doubles, rules are written with
// ints).
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("server", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("agent", cel.StringType),
		cel.Variable("conversationId", cel.StringType),
		cel.Variable("context", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxWhenLen),
	)
}

// newEditEnv returns the CEL environment of editWhen expressions: that
// of when, and requested, the args the call was asked with (args are the
// edited ones).
func newEditEnv() (*cel.Env, error) {
	env, err := newEnv()
	if err != nil {
		return nil, err
	}
	return env.Extend(cel.Variable("requested", cel.MapType(cel.StringType, cel.DynType)))
}

// compile type-checks expr and returns its program, or a message that
// says what is wrong, with CEL's line:column in the expression, and how
// to fix it.
func compile(env *cel.Env, expr string) (cel.Program, string) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		var msgs []string
		hint := ""
		for _, e := range iss.Errors() {
			m := strings.TrimSuffix(e.Message, " (in container '')")
			if e.Location != nil && e.Location.Line() > 0 {
				m += fmt.Sprintf(" (at %d:%d)", e.Location.Line(), e.Location.Column()+1)
			}
			msgs = append(msgs, m)
			switch {
			case strings.HasPrefix(e.Message, "undeclared reference"):
				hint = "the variables are " + variables + ", and arguments are read as args.<name>"
			case strings.HasPrefix(e.Message, "found no matching overload"):
				hint = "the operand types do not fit: compare a value with one of its own kind, e.g. args.amount > 500 or args.currency == \"USD\""
			case hint == "":
				hint = "fix the expression; it is CEL (https://cel.dev), e.g. args.amount > 500 && agent == \"support-bot\""
			}
		}
		return nil, strings.Join(msgs, "; ") + "; " + hint
	}
	if out := ast.OutputType(); !out.IsExactType(types.BoolType) {
		return nil, fmt.Sprintf("the expression is of type %s, but when must be true or false; write a condition, e.g. args.amount > 500 or args.express == true", out)
	}
	prg, err := env.Program(ast,
		cel.CostLimit(MaxCost),
		cel.InterruptCheckFrequency(interruptEvery),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		return nil, fmt.Sprintf("%v; simplify the expression", err)
	}
	return prg, ""
}

// activation returns the variables of req for when expressions. Absent
// maps are empty, so that has(args.x) is false rather than an error.
func activation(req Request) map[string]any {
	args, ctxv := req.Args, req.Context
	if args == nil {
		args = map[string]any{}
	}
	if ctxv == nil {
		ctxv = map[string]any{}
	}
	return map[string]any{
		"tool":           req.Tool,
		"server":         req.Server,
		"args":           args,
		"agent":          req.Agent,
		"conversationId": req.ConversationID,
		"context":        ctxv,
	}
}

// eval evaluates r's when over vars.
func (r *Rule) eval(ctx context.Context, vars map[string]any) (bool, error) {
	return evalBool(ctx, r.program, vars)
}

// evalBool evaluates a condition's program over vars.
func evalBool(ctx context.Context, prg cel.Program, vars map[string]any) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	out, _, err := prg.ContextEval(ctx, vars)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %v of type %s, not true or false", out.Value(), out.Type())
	}
	return bool(b), nil
}

// evalHint says how to fix what made an evaluation fail.
func evalHint(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return "the caller's context ended before the rule was evaluated; ask again"
	case strings.Contains(msg, "no such key"):
		return "the call lacks an argument the rule reads: guard optional arguments with has(), e.g. has(args.amount) && args.amount > 500"
	case strings.Contains(msg, "cost limit exceeded"):
		return fmt.Sprintf("the expression costs more than %d to evaluate on these arguments: simplify it, or avoid macros over large lists", MaxCost)
	case strings.Contains(msg, "no such overload"):
		return "an argument has another type than the rule expects (e.g. a string where a number is compared): check the agent's arguments, or convert with double() or string()"
	default:
		return "fix the rule's when, or the arguments the agent sends"
	}
}
