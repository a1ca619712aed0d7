// Positions for the graph canvas computed in one pass, in place of cytoscape's concentric
// layout (which restyles and measures every node before placing it): the same rings, so
// the picture is unchanged, at a fraction of the cost.

export interface Bounds {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
}

/**
 * rings places nodes on concentric rings by depth, the lowest depth in the centre, in the
 * given order within a ring, clockwise from the top; minDist is the least distance between
 * two nodes' centres (the largest node plus the spacing), as cytoscape's concentric layout
 * with avoidOverlap and one level per depth.
 */
export function rings(nodes: { id: string; depth?: number }[], minDist: number): { at: Map<string, { x: number; y: number }>; bounds: Bounds } {
  const levels = new Map<number, string[]>();
  for (const n of nodes) {
    const d = n.depth ?? 0;
    let l = levels.get(d);
    if (!l) levels.set(d, (l = []));
    l.push(n.id);
  }
  const at = new Map<string, { x: number; y: number }>();
  const b: Bounds = { x1: 0, y1: 0, x2: 0, y2: 0 };
  let r = 0;
  for (const d of [...levels.keys()].sort((a, c) => a - c)) {
    const ids = levels.get(d)!;
    const dTheta = (2 * Math.PI) / ids.length;
    if (ids.length > 1) {
      // The radius at which neighbours on the ring are minDist apart (a chord of dTheta).
      const rMin = minDist / Math.sqrt((Math.cos(dTheta) - 1) ** 2 + Math.sin(dTheta) ** 2);
      r = Math.max(rMin, r);
    }
    for (let j = 0; j < ids.length; j++) {
      const theta = 1.5 * Math.PI + dTheta * j;
      const x = r * Math.cos(theta);
      const y = r * Math.sin(theta);
      at.set(ids[j], { x, y });
      if (x < b.x1) b.x1 = x;
      if (x > b.x2) b.x2 = x;
      if (y < b.y1) b.y1 = y;
      if (y > b.y2) b.y2 = y;
    }
    r += minDist;
  }
  return { at, bounds: b };
}
