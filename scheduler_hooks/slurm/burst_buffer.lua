--[[
burst_buffer.lua for BurstBufferType=burst_buffer/lua (Slurm 22.05): Granary
as a "burst buffer" that stages a job's datasets into the cache of the job's
nodes before it runs. This file and a burst_buffer.conf (it may be empty) sit
next to slurm.conf. A job asks for it with a directive in its script:

    #!/bin/bash
    #BB_LUA granary imagenet,coco

slurm_bb_pre_run runs once the job has its nodes and before its script
starts; it prewarms the datasets onto exactly those nodes (granary prewarm
--nodes) and returns when they are cached. Staging never fails the job: a
prewarm error is logged and the job reads through the cache. Slurm runs these
functions in slurmscriptd, outside slurmctld's locks, so they may call scontrol
and granary. The other functions are required by the plugin and do nothing.

GRANARY and GRANARY_SERVER in slurmctld's environment name the CLI and the
granaryd to ask (default: granary on PATH and the local socket); when that is
a HOST:PORT, GRANARY_TOKEN_FILE names the cluster token file (the CLI reads
it). Granary node ids must equal Slurm node names: --nodes maps the job's
hosts to their cache groups, and every member of those groups fetches its
share. Log lines go to slurmctld's log and, when GRANARY_HOOK_LOG names a
file, there too.
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

function slurm_bb_job_process(job_script)
  return slurm.SUCCESS
end

function slurm_bb_pools()
  return slurm.SUCCESS
end

function slurm_bb_job_teardown(job_id, job_script, hurry)
  return slurm.SUCCESS
end

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
  return slurm.SUCCESS
end

function slurm_bb_data_in(job_id, job_script)
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
  local job, ok = run("scontrol show job -o " .. shell_quote(tostring(job_id)))
  local nodelist = ok and string.match(job, " NodeList=(%S+)") or nil
  if nodelist == nil or nodelist == "(null)" then
    log(false, "granary: JobId=%s has no nodes; nothing prewarmed", tostring(job_id))
    return slurm.SUCCESS
  end
  local hosts = run("scontrol show hostnames " .. shell_quote(nodelist) .. " | paste -sd, -")
  hosts = string.gsub(hosts, "%s+$", "")
  for _, dataset in ipairs(datasets) do
    log(false, "granary: JobId=%s prewarming '%s' on %s", tostring(job_id), dataset, hosts)
    local output, prewarmed = run(granary .. " prewarm " .. shell_quote(dataset) ..
                                  " --nodes " .. shell_quote(hosts) .. " --json")
    if prewarmed then
      log(false, "granary: JobId=%s prewarmed '%s' on %s", tostring(job_id), dataset, hosts)
    else
      log(true, "granary: JobId=%s prewarm of '%s' failed, the job reads through the cache: %s",
          tostring(job_id), dataset, output)
    end
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
  return slurm.SUCCESS, "granary: datasets are staged by slurm_bb_pre_run\n"
end
