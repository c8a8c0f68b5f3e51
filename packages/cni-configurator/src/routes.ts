// `defaultRoute: false` (a secondary network): once the ADD succeeded, the default routes the
// network's plugins added through the attachment's interface are deleted inside the namespace
// (the context's sandbox: @allocnet/netns), and left out of the result that is recorded and of
// the CNI cache's copy, which CHECK hands the plugins as prevResult: bridge's and macvlan's CHECK
// (1.1.1) look up every route of the result inside the namespace and fail on a missing one.
//
// Concurrency: runs inside the setup of one allocation, after its ADD and before it returns; the
// runner never runs two operations on one allocation at once, so nothing else writes this
// attachment's cache entry meanwhile.
import type { CniResult } from '@allocnet/cni';
import type { ConfiguratorContext } from './context.js';

/** Whether a route of a result is a default route (either family). */
export function isDefaultRoute(route: { readonly dst?: unknown }): boolean {
  return route.dst === '0.0.0.0/0' || route.dst === '::/0';
}

/** `result` without its default routes. */
export function withoutDefaultRoutes(result: CniResult): CniResult {
  return { ...result, routes: result.routes.filter((r) => !isDefaultRoute(r)) };
}

/**
 * Deletes the default routes through `ifName` inside `netns`, then takes them out of the CNI
 * cache's result of the attachment (when the runtime cached one). Resolves the result to record.
 * Throws what the namespace command or the cache write threw: the setup then undoes the ADD.
 */
export async function dropDefaultRoutes(
  ctx: ConfiguratorContext,
  where: { readonly network: string; readonly allocId: string; readonly netns: string },
  ifName: string,
  result: CniResult,
  call: { signal?: AbortSignal },
): Promise<CniResult> {
  await ctx.sandbox.deleteDefaultRoutes(where.netns, ifName, call);
  const cached = await ctx.cache.readResult(where.network, where.allocId, ifName);
  const json = cached?.result;
  if (cached !== undefined && typeof json === 'object' && json !== null) {
    const routes = (json as { routes?: unknown }).routes;
    if (Array.isArray(routes))
      await ctx.cache.writeResult({
        ...cached,
        result: {
          ...json,
          routes: routes.filter(
            (r: unknown) => !(typeof r === 'object' && r !== null && isDefaultRoute(r)),
          ),
        },
      });
  }
  return withoutDefaultRoutes(result);
}
