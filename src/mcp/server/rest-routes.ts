import type { Task } from '@modelcontextprotocol/sdk/types.js';
import { Router, type Response } from 'express';
import type { Access } from '../../auth/access.js';
import { z } from 'zod';
import { ToolrouterError, type ErrorCode } from '../../errors.js';
import { GatewayError, type GatewayErrorCode, type McpGateway } from '../gateway/gateway.js';
import type { UpstreamManager } from '../upstream/index.js';
import type { ImportedServers } from '../upstream/client-config.js';
import { accessOf } from '../../http/auth.js';
import { HttpError, parseBody } from '../../http/errors.js';
import { maskServer } from './server-routes.js';
import { ownerOf } from '../relay/tasks.js';

function maskedConfig(upstreams: UpstreamManager, name: string): Record<string, unknown> | undefined {
  const known = upstreams.configOf(name);
  return known && maskServer(known.config);
}

const callBody = z
  .object({
    name: z.string({ error: 'is required and must be a string' }).min(1, 'must not be empty'),
    arguments: z.record(z.string(), z.unknown(), { error: 'must be an object' }).optional(),
    /** Run as a task (the REST form of MCP 2025-11-25's task-augmented tools/call): answered 202 with the task. */
    task: z.object({ ttl: z.number().int().positive().optional() }, { error: 'must be an object' }).strict().optional(),
  })
  // LiteLLM clients may send extra routing fields (server_id, ...); names are already unique, so they are ignored.
  .loose();

/**
 * LiteLLM-compatible REST face of the MCP gateway: list every callable upstream tool, call one by name; and the
 * upstream servers' status. Same gateway
 * as /mcp, so the same argument validation and forwarding; failures map to statuses instead of isError results.
 */
export function mcpRestRoutes(gateway: McpGateway, upstreams: UpstreamManager, leftOut: ImportedServers['skipped'] = []): Router {
  const router = Router();

  // Upstream server health: state, tool count, last error (with the server's last stderr lines), clashes.
  router.get('/v1/mcp/servers', (_req, res) => {
    const access = accessOf(res);
    const servers = upstreams.status().filter((server) => access.canSeeServer(server.name));
    // The admin sees each server's settings too, secrets masked.
    // `status` is `state` under the name SPEC.md gives outside tools; both stay.
    // Imported entries that were left out (bad type, unset variable, bad URL...) are listed with the reason beside
    // the servers, to the admin only: their files and reasons are operator details.
    if (access.isAdmin) {
      return res.json({
        servers: servers.map((server) => ({ ...server, status: server.state, config: maskedConfig(upstreams, server.name) })),
        leftOut: leftOut.map(({ server, file, reason, disabled }) => ({ name: server, file, reason, ...(disabled ? { disabled } : {}) })),
      });
    }
    // A key gets the health of its servers, counted in its own tools. Errors (with the server's stderr), clashes and
    // skipped or mistransformed tools are operator details that may name tools or secrets the key must not see.
    const visible = new Map<string, number>();
    for (const entry of gateway.callableEntries(access)) visible.set(entry.source, (visible.get(entry.source) ?? 0) + 1);
    res.json({
      servers: servers.map(({ name, transport, state, connectedAt, failures }) => ({ name, transport, state, status: state, tools: visible.get(name) ?? 0, connectedAt, failures })),
    });
  });

  router.get('/mcp-rest/tools/list', (req, res) => {
    // LiteLLM filters by server with ?server_id=; here the server id is the configured server name.
    const server = typeof req.query.server_id === 'string' ? req.query.server_id : undefined;
    const tools = gateway
      .callableEntries(accessOf(res))
      .filter((entry) => server === undefined || entry.source === server)
      .map((entry) => ({ ...entry.tool, mcp_info: { server_name: entry.source } }));
    res.json({ tools });
  });

  router.post('/mcp-rest/tools/call', async (req, res) => {
    const body = parseBody(callBody, req.body);
    if (body.task !== undefined) {
      const access = accessOf(res);
      // The call's failure (a GatewayError) becomes the task's failure; its message is kept for the result.
      const task = await gateway.tasks.start(restOwner(access), body.task.ttl, (signal) => gateway.callTool(body.name, body.arguments, { access, signal, asTask: true, surface: 'rest' }));
      return res.status(202).json({ task });
    }
    // A result with isError: true is the tool's own answer and passes through with 200.
    res.json(await rest(() => gateway.callTool(body.name, body.arguments, { access: accessOf(res), surface: 'rest' })));
  });

  // Tasks started over REST: the caller's key's own (REST has no session), as /mcp's tasks/get, result, list, cancel.
  router.get('/mcp-rest/tasks', async (_req, res) => {
    res.json({ tasks: await gateway.tasks.list(restOwner(accessOf(res))) });
  });
  router.get('/mcp-rest/tasks/:id', async (req, res) => {
    res.json({ task: await ownTask(gateway, res, req.params.id) });
  });
  router.get('/mcp-rest/tasks/:id/result', async (req, res) => {
    const task = await ownTask(gateway, res, req.params.id);
    if (task.status === 'working' || task.status === 'input_required') {
      throw new HttpError(409, 'conflict', `task ${task.taskId} is still ${task.status}: poll GET /mcp-rest/tasks/${task.taskId} (every ${task.pollInterval ?? 500} ms)`);
    }
    res.json({ task, result: (await gateway.tasks.get(restOwner(accessOf(res)), task.taskId))?.result });
  });
  router.post('/mcp-rest/tasks/:id/cancel', async (req, res) => {
    const task = await ownTask(gateway, res, req.params.id);
    if (task.status === 'completed' || task.status === 'failed' || task.status === 'cancelled') {
      throw new HttpError(409, 'conflict', `task ${task.taskId} has already ended (${task.status})`);
    }
    // Ended here at once; the work stops on the instance running it (src/mcp/relay/tasks.ts).
    const cancelled = await gateway.tasks.cancel(restOwner(accessOf(res)), task.taskId, 'Cancelled by the caller.');
    res.json({ task: cancelled?.task ?? task });
  });

  // Resources and prompts of the upstreams the key may use, as /mcp lists them (namespaced names, upstream URIs).
  router.get('/mcp-rest/resources/list', (_req, res) => {
    const { resources, templates } = gateway.offered(accessOf(res));
    res.json({ resources, resourceTemplates: templates });
  });

  router.post('/mcp-rest/resources/read', async (req, res) => {
    const body = parseBody(readBody, req.body);
    res.json(await rest(() => gateway.readResource(body.uri, { access: accessOf(res), surface: 'rest' })));
  });

  router.get('/mcp-rest/prompts/list', (_req, res) => {
    res.json({ prompts: gateway.offered(accessOf(res)).prompts });
  });

  router.post('/mcp-rest/prompts/get', async (req, res) => {
    const body = parseBody(promptBody, req.body);
    res.json(await rest(() => gateway.getPrompt(body.name, body.arguments, { access: accessOf(res), surface: 'rest' })));
  });

  return router;
}

const readBody = z.object({ uri: z.string({ error: 'is required and must be a string' }).min(1, 'must not be empty').max(8_192) }).strict();
const promptBody = z
  .object({
    name: z.string({ error: 'is required and must be a string' }).min(1, 'must not be empty'),
    arguments: z.record(z.string(), z.string({ error: 'prompt arguments are strings' })).optional(),
  })
  .strict();

/** REST tasks belong to the caller alone (no session): never visible to the same caller's MCP sessions, nor theirs. */
function restOwner(access: Access): string {
  return `${ownerOf(access)} rest`;
}

/** The caller's task, or 404 exactly as for an id that never existed. */
async function ownTask(gateway: McpGateway, res: Response, taskId: string): Promise<Task> {
  const task = (await gateway.tasks.get(restOwner(accessOf(res)), taskId))?.task;
  if (!task) throw new HttpError(404, 'not_found', `task not found: ${taskId}`);
  return task;
}

async function rest<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw error instanceof GatewayError ? restError(error) : error;
  }
}

/**
 * The REST face's one renaming of gateway codes: the /mcp-rest mirror has always answered a tool nobody serves as
 * `not_found` and the caller's other mistakes (arguments, a virtual tool called through call_tool, a cursor) as
 * `invalid_request`, with the same statuses (404, 400). Every other code (forbidden, not_found, index_not_ready,
 * upstream_*) goes out as it is, with its usual status and Retry-After.
 */
const REST_CODES: Partial<Record<GatewayErrorCode, ErrorCode>> = {
  unknown_tool: 'not_found',
  invalid_arguments: 'invalid_request',
  recursion: 'invalid_request',
  invalid_cursor: 'invalid_request',
};

function restError(error: GatewayError): ToolrouterError {
  const code = REST_CODES[error.code];
  return code === undefined ? error : new ToolrouterError(code, error.message, { cause: error });
}
