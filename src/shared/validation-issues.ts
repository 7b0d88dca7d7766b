/** A zod issue as the validation hook receives it (zod 4: a union's issue carries each form's issues). */
export interface ValidationIssue {
  code?: string;
  path: PropertyKey[];
  message: string;
  errors?: ValidationIssue[][];
}

/**
 * The issues of a refused request, each with the field it names: a union's "Invalid input",
 * which names nothing, becomes the issues of the form(s) the request came closest to (fewest problems),
 * with their fields; when several forms are equally close, a first issue says that none matched and the
 * forms' own issues follow (e.g. `{}` for a request: `medication`, `treatmentOption`, `protocol`, each
 * required by one form).
 */
export function describeIssues(
  issues: readonly ValidationIssue[],
  base: PropertyKey[] = [],
): { path: string; message: string }[] {
  const out = issues.flatMap((issue) => {
    const path = [...base, ...issue.path];
    if (issue.code === 'invalid_union' && issue.errors?.length) {
      const forms = issue.errors.map((form) => describeIssues(form, path));
      const fewest = Math.min(...forms.map((form) => form.length));
      const closest = forms.filter((form) => form.length === fewest);
      if (closest.length === 1) {
        return closest[0];
      }
      // Every form's word on the fields the closest ones name (a `decision` each form expects differently).
      const named = new Set(closest.flat().map((i) => i.path));
      const onThose = forms.flat().filter((i) => named.has(i.path) && i.path !== join(path));
      return [
        {
          path: join(path),
          message: `Matches none of the ${issue.errors.length} accepted forms; what the closest ones need follows`,
        },
        ...mergeExpected([...closest.flat(), ...onThose]),
      ];
    }
    return [{ path: join(path), message: issue.message }];
  });
  const seen = new Set<string>();
  return out.filter((issue) => {
    const key = `${issue.path}\u0000${issue.message}`;
    if (seen.has(key)) {
      return false;
    }
    seen.add(key);
    return true;
  });
}

const join = (path: PropertyKey[]): string => path.map(String).join('.');

/** `expected "accept"` and `expected "decline"` on one field as one issue: `expected "accept" or "decline"`. */
function mergeExpected(issues: { path: string; message: string }[]): { path: string; message: string }[] {
  const EXPECTED = /^Invalid input: expected (".*")$/;
  const values = new Map<string, string[]>();
  const rest: { path: string; message: string }[] = [];
  for (const issue of issues) {
    const value = EXPECTED.exec(issue.message)?.[1];
    if (value === undefined) {
      rest.push(issue);
      continue;
    }
    const list = values.get(issue.path) ?? [];
    if (!list.includes(value)) {
      list.push(value);
    }
    values.set(issue.path, list);
  }
  const merged = [...values].map(([path, list]) => ({
    path,
    message: `Invalid input: expected ${list.length > 1 ? `${list.slice(0, -1).join(', ')} or ${list.at(-1)}` : list[0]}`,
  }));
  return [...merged, ...rest];
}
