// Counts and sizes as people read them, in the browser's locale.

// formatCount writes a count with the locale's separators: 1,234,567.
export function formatCount(n) {
  return Number(n || 0).toLocaleString();
}

// formatBytes writes a size in bytes, KiB, MiB or GiB.
export function formatBytes(n) {
  let v = Number(n || 0);
  if (v < 1024) return `${v} B`;
  for (const unit of ["KiB", "MiB", "GiB", "TiB"]) {
    v /= 1024;
    if (v < 1024 || unit === "TiB") return `${v.toLocaleString([], { maximumFractionDigits: 1 })} ${unit}`;
  }
  return `${v} B`;
}
