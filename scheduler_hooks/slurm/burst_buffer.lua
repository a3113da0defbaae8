--[[
burst_buffer.lua for BurstBufferType=burst_buffer/lua (Slurm 22.05): Granary
as a "burst buffer" that fills the cache with a job's datasets while the job
waits in the queue. This file and a burst_buffer.conf (it may be empty) sit
next to slurm.conf. A job asks for it with a directive in its script's
leading comment block:

    #!/bin/bash
    #BB_LUA granary imagenet,coco

slurm_bb_data_in runs while the job is pending: it hands the job to granaryd
(granary stage-in start) and returns at once, always in under a second, so
that no job ever waits on it (Slurm does not start a job before its stage-in
returns, and one past StageInTimeout is left held for good). granaryd then
follows the job's forecast (the nodes and start time the backfill scheduler
plans, or its partition's nodes until there are some) and prewarms the
datasets onto those nodes' cache groups, nearest start first.

slurm_bb_pre_run runs once the job has its nodes, before its script starts:
it has granaryd top up what the groups of those nodes still lack (granary
stage-in top-up; nothing, when the forecast held), holding the job at most
GRANARY_STAGE_IN_MAX_WAIT seconds (default 60, and never more than half of
burst_buffer.conf's OtherTimeout, which bounds pre_run) and only until
GRANARY_STAGE_IN_ENOUGH of each dataset is cached there (default 1, all of
it). slurm_bb_job_teardown ends the stage-in, and ends the job on the
granaryd it asks (granary jobs end slurm:ID), which keeps the job's receipt:
the dataset versions it read there, and what it read of each (the Epilog
granary-epilog does the same on every node of the job). `scontrol show
bbstat` shows every stage-in (slurm_bb_get_status: granary stage-in ls).
Staging never fails a job: an error is logged and the job reads through the
cache.

Slurm runs these functions in slurmscriptd, outside slurmctld's locks, so
they may call granary. GRANARY and GRANARY_SERVER in slurmctld's environment
name the CLI and the granaryd to ask (default: granary on PATH and the local
socket); when that is a HOST:PORT, GRANARY_TOKEN_FILE names the cluster token
file (the CLI reads it); the hooks' user must hold it or be an administrator
of that granaryd. That granaryd reads the queue with scontrol (its
`scontrol` config key), so it runs where scontrol reaches slurmctld. Granary
node ids must equal Slurm node names: nodes map to cache groups by them. Log
lines go to slurmctld's log and, when GRANARY_HOOK_LOG names a file, there
too.
--]]

local granary = os.getenv("GRANARY") or "granary"
local hook_log = os.getenv("GRANARY_HOOK_LOG")

local function log(error, format, ...)
  local line = string.format(format, ...)
  if error then slurm.log_error("%s", line) else slurm.log_info("%s", line) end
  if hook_log ~= nil then
    local file = io.open(hook_log, "a")
    if file ~= nil then
      file:write(os.date("!%Y-%m-%dT%H:%M:%SZ ") .. line .. "\n")
      file:close()
    end
  end
end

local function shell_quote(text)
  return "'" .. string.gsub(text, "'", "'\\''") .. "'"
end

-- Runs a command; its output and whether it succeeded.
local function run(command)
  local pipe = io.popen(command .. " 2>&1; echo \"exit=$?\"")
  local output = pipe:read("*a")
  pipe:close()
  local status = string.match(output, "exit=(%d+)%s*$")
  output = string.gsub(output, "exit=%d+%s*$", "")
  return output, status == "0"
end

-- Dataset names from "#BB_LUA granary a,b" lines of the job script file.
local function requested_datasets(job_script)
  local datasets = {}
  local file = io.open(job_script, "r")
  if file == nil then return datasets end
  for line in file:lines() do
    local list = string.match(line, "^#BB_LUA%s+granary%s+(%S+)")
    if list ~= nil then
      for name in string.gmatch(list, "[^,]+") do table.insert(datasets, name) end
    end
  end
  file:close()
  return datasets
end

-- Seconds pre_run may hold a job: the administrator's policy, at most half
-- of burst_buffer.conf's OtherTimeout (default 300 s), which bounds pre_run.
local function top_up_wait()
  local wanted = tonumber(os.getenv("GRANARY_STAGE_IN_MAX_WAIT") or "") or 60
  local other_timeout = 300
  local conf = os.getenv("SLURM_CONF") or "/etc/slurm/slurm.conf"
  local file = io.open(string.gsub(conf, "[^/]*$", "") .. "burst_buffer.conf", "r")
  if file ~= nil then
    for line in file:lines() do
      local value = string.match(string.lower(line), "^%s*othertimeout%s*=%s*(%d+)")
      if value ~= nil then other_timeout = tonumber(value) end
    end
    file:close()
  end
  return math.max(1, math.floor(math.min(wanted, other_timeout / 2)))
end

function slurm_bb_job_process(job_script)
  return slurm.SUCCESS
end

function slurm_bb_pools()
  return slurm.SUCCESS
end

function slurm_bb_job_teardown(job_id, job_script, hurry)
  local output, ended = run("timeout -k 1 5 " .. granary .. " jobs end " ..
                            shell_quote("slurm:" .. tostring(job_id)))
  if ended then
    local said = string.gsub(output, "%s+$", "")
    log(false, "granary: JobId=%s %s", tostring(job_id), said)
  else
    log(true, "granary: JobId=%s ended without a receipt: %s", tostring(job_id), output)
  end
  if #requested_datasets(job_script) == 0 then return slurm.SUCCESS end
  output, ended = run("timeout -k 1 5 " .. granary .. " stage-in end " ..
                      shell_quote(tostring(job_id)) .. " --timeout-ms 4000")
  if not ended then
    log(true, "granary: JobId=%s stage-in not ended: %s", tostring(job_id), output)
  end
  return slurm.SUCCESS
end

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
  return slurm.SUCCESS
end

function slurm_bb_data_in(job_id, job_script)
  local datasets = requested_datasets(job_script)
  if #datasets == 0 then return slurm.SUCCESS end
  local list = table.concat(datasets, ",")
  -- timeout bounds the call even when granaryd accepts and never answers.
  local output, started = run("timeout -k 0.1 0.8 " .. granary .. " stage-in start " ..
                              shell_quote(tostring(job_id)) .. " " .. shell_quote(list) ..
                              " --timeout-ms 600")
  if started then
    log(false, "granary: JobId=%s staging '%s' while it waits", tostring(job_id), list)
  else
    log(true, "granary: JobId=%s stage-in of '%s' not started, the job reads through the cache: %s",
        tostring(job_id), list, output)
  end
  return slurm.SUCCESS
end

function slurm_bb_real_size(job_id)
  return slurm.SUCCESS
end

function slurm_bb_paths(job_id, job_script, path_file)
  return slurm.SUCCESS
end

function slurm_bb_pre_run(job_id, job_script)
  local datasets = requested_datasets(job_script)
  if #datasets == 0 then return slurm.SUCCESS end
  local list = table.concat(datasets, ",")
  -- squeue prints the node list alone: in scontrol's line, a job name or
  -- comment holding " NodeList=" would pass for it.
  local job, ok = run("squeue --noheader --format=%N --jobs=" .. shell_quote(tostring(job_id)))
  local nodelist = ok and string.match(job, "^%s*(%S+)%s*$") or nil
  if nodelist == nil or nodelist == "(null)" then
    log(false, "granary: JobId=%s has no nodes; nothing topped up", tostring(job_id))
    return slurm.SUCCESS
  end
  local hosts = run("scontrol show hostnames " .. shell_quote(nodelist) .. " | paste -sd, -")
  hosts = string.gsub(hosts, "%s+$", "")
  local wait = top_up_wait()
  local enough = tonumber(os.getenv("GRANARY_STAGE_IN_ENOUGH") or "") or 1
  log(false, "granary: JobId=%s topping up '%s' on %s (at most %d s)", tostring(job_id), list,
      hosts, wait)
  local output, topped = run(string.format(
      "timeout -k 1 %d %s stage-in top-up %s --nodes %s --datasets %s --max-wait %d --enough %s" ..
      " --timeout-ms 5000", wait + 10, granary, shell_quote(tostring(job_id)), shell_quote(hosts),
      shell_quote(list), wait, tostring(enough)))
  if topped then
    log(false, "granary: JobId=%s topped up '%s' on %s:\n%s", tostring(job_id), list, hosts, output)
  else
    log(true, "granary: JobId=%s top-up of '%s' failed, the job reads through the cache: %s",
        tostring(job_id), list, output)
  end
  return slurm.SUCCESS
end

function slurm_bb_post_run(job_id, job_script)
  return slurm.SUCCESS
end

function slurm_bb_data_out(job_id, job_script)
  return slurm.SUCCESS
end

function slurm_bb_get_status(...)
  local output, listed = run("timeout -k 1 5 " .. granary .. " stage-in ls --timeout-ms 4000")
  if not listed then
    return slurm.SUCCESS, "granary: stage-ins unavailable: " .. output
  end
  return slurm.SUCCESS, output
end
