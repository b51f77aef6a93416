// Small JSON helpers: a structural diff listing added / removed / changed
// paths, and JSON Merge Patch (RFC 7396) construction and application.
//
// A merge patch cannot store null (null means "remove this key"), so a null
// the user writes becomes a removal; the editor warns about it.

export function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function deepEqual(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  }
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

const plainKey = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/** formatPath writes ["variables", "a b", 0] as variables["a b"][0]. */
export function formatPath(path) {
  let s = '';
  for (const seg of path) {
    if (typeof seg === 'number') s += `[${seg}]`;
    else if (plainKey.test(seg)) s += (s ? '.' : '') + seg;
    else s += `[${JSON.stringify(seg)}]`;
  }
  return s || '(root)';
}

/**
 * diff lists what changed from a to b, depth first in key order:
 * [{path: [...], op: 'added'|'removed'|'changed', from, to}]. Objects are
 * compared key by key and arrays index by index; anything else is changed
 * when not equal.
 */
export function diff(a, b, path = [], out = []) {
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    for (const k of keys) {
      const inA = Object.hasOwn(a, k);
      const inB = Object.hasOwn(b, k);
      if (!inB) out.push({ path: [...path, k], op: 'removed', from: a[k] });
      else if (!inA) out.push({ path: [...path, k], op: 'added', to: b[k] });
      else diff(a[k], b[k], [...path, k], out);
    }
  } else if (Array.isArray(a) && Array.isArray(b)) {
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) {
      if (i >= b.length) out.push({ path: [...path, i], op: 'removed', from: a[i] });
      else if (i >= a.length) out.push({ path: [...path, i], op: 'added', to: b[i] });
      else diff(a[i], b[i], [...path, i], out);
    }
  } else if (!deepEqual(a, b)) {
    out.push({ path, op: 'changed', from: a, to: b });
  }
  return out;
}

/**
 * mergePatch returns the smallest merge patch taking base to target (both
 * objects): changed and added keys with their new value, removed keys as
 * null, objects recursed into, everything else replaced whole. A key set to
 * null in target is removed; a new key whose value is null is left out.
 */
export function mergePatch(base, target) {
  const patch = {};
  for (const k of Object.keys(base)) {
    if (!Object.hasOwn(target, k)) patch[k] = null;
  }
  for (const [k, v] of Object.entries(target)) {
    const had = Object.hasOwn(base, k);
    const old = base[k];
    if (v === null) {
      if (had && old !== null) patch[k] = null;
      continue;
    }
    if (isObject(v) && had && isObject(old)) {
      const sub = mergePatch(old, v);
      if (Object.keys(sub).length > 0) patch[k] = sub;
    } else if (!had || !deepEqual(old, v)) {
      patch[k] = stripNulls(v);
    }
  }
  return patch;
}

/**
 * fullPatch is what Save sends: the whole edited document as a merge patch,
 * plus null for every key (at any depth) that was in base and is gone. Applied
 * to base it gives target. Nulls in target are handled as in mergePatch: an
 * unchanged null is left out (kept), a new one removes the key.
 */
export function fullPatch(base, target) {
  const patch = {};
  for (const [k, v] of Object.entries(target)) {
    const old = isObject(base) ? base[k] : undefined;
    if (v === null) {
      if (old !== undefined && old !== null) patch[k] = null;
      continue;
    }
    patch[k] = isObject(v) ? fullPatch(isObject(old) ? old : undefined, v) : v;
  }
  if (isObject(base)) {
    for (const k of Object.keys(base)) {
      if (!Object.hasOwn(target, k)) patch[k] = null;
    }
  }
  return patch;
}

/** applyMergePatch is RFC 7396 MergePatch(target, patch); it does not modify its arguments. */
export function applyMergePatch(target, patch) {
  if (!isObject(patch)) return structuredClone(patch);
  const out = isObject(target) ? structuredClone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyMergePatch(out[k], v);
  }
  return out;
}

/** nullPaths lists the paths of null values inside v (which a merge patch cannot store). */
export function nullPaths(v, path = [], out = []) {
  if (v === null) out.push(path);
  else if (isObject(v)) for (const [k, x] of Object.entries(v)) nullPaths(x, [...path, k], out);
  return out;
}

/**
 * overlaps returns the paths both change lists touch: equal paths, or one
 * inside the other (["variables"] replaced vs ["variables","x"] changed).
 */
export function overlaps(changesA, changesB) {
  const out = [];
  for (const a of changesA) {
    for (const b of changesB) {
      const n = Math.min(a.path.length, b.path.length);
      let same = true;
      for (let i = 0; i < n; i++) {
        if (a.path[i] !== b.path[i]) { same = false; break; }
      }
      if (same) {
        const p = a.path.length >= b.path.length ? a.path : b.path;
        if (!out.some((q) => formatPath(q) === formatPath(p))) out.push(p);
      }
    }
  }
  return out;
}

function stripNulls(v) {
  if (!isObject(v)) return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    if (x !== null) out[k] = stripNulls(x);
  }
  return out;
}
