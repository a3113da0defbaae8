--[[
job_submit.lua (JobSubmitPlugins=lua; this file next to slurm.conf): a job
names the datasets it reads in its comment,

    sbatch --comment=granary:imagenet,coco train.sh

and is given a soft preference for nodes that hold them: the features that
granary-slurm-features publishes (granary_<dataset>) are added to the job's
--prefer, joined with '&'. --prefer is soft (Slurm 22.05): the job runs
elsewhere rather than waiting when no free node has them. Slurm rejects a job
preferring a feature that no node has at all, so only the features listed in
granary-slurm-features' state file ($GRANARY_SLURM_FEATURES in slurmctld's
environment, else /var/lib/granary/slurm-features) are preferred. The comment
also tells the prewarm hooks (granary-prolog-slurmctld, burst_buffer.lua) what
to fetch.
--]]

local state_file = os.getenv("GRANARY_SLURM_FEATURES") or "/var/lib/granary/slurm-features"

-- The features some node has now, as a set.
local function published_features()
  local features = {}
  local file = io.open(state_file, "r")
  if file == nil then return features end
  for line in file:lines() do features[line] = true end
  file:close()
  return features
end

-- "granary:a,b" anywhere in the comment, up to the next blank.
local function requested_datasets(comment)
  if comment == nil then return {} end
  local list = string.match(comment, "granary:(%S+)")
  local datasets = {}
  if list == nil then return datasets end
  for name in string.gmatch(list, "[^,]+") do
    table.insert(datasets, name)
  end
  return datasets
end

local function feature_name(dataset)
  return "granary_" .. string.gsub(dataset, "[^%w_-]", "_")
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local datasets = requested_datasets(job_desc.comment)
  if #datasets == 0 then return slurm.SUCCESS end
  local published = published_features()
  local features = {}
  for _, dataset in ipairs(datasets) do
    local feature = feature_name(dataset)
    if published[feature] then
      table.insert(features, feature)
    else
      slurm.log_info("granary: no node caches %s yet; not preferred", dataset)
    end
  end
  if #features == 0 then return slurm.SUCCESS end
  local wanted = table.concat(features, "&")
  if job_desc.prefer == nil or job_desc.prefer == "" then
    job_desc.prefer = wanted
  else
    job_desc.prefer = job_desc.prefer .. "&" .. wanted
  end
  slurm.log_info("granary: job from uid %u prefers %s", submit_uid, job_desc.prefer)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
