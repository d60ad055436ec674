//! `xq nets`: the trained nets of the registry.

use xq_proto::client::Client;
use xq_proto::v1;

/// `xq nets`: the nets, newest first, a line each.
pub async fn list(client: &mut Client, lineage: String) -> anyhow::Result<()> {
    for net in client.list_nets(v1::ListNetsRequest { lineage }).await?.into_inner().nets {
        out!("{}", net_line(&net));
    }
    Ok(())
}

/// `xq nets --files`: every net file uploaded, any engine's, newest first, a line each.
pub async fn files(client: &mut Client) -> anyhow::Result<()> {
    for file in client.list_net_files(v1::ListNetFilesRequest {}).await?.into_inner().files {
        out!("{}", net_file_line(&file));
    }
    Ok(())
}

/// One line describing a net file: hash, name, size, uploader and the jobs naming it.
fn net_file_line(file: &v1::NetFile) -> String {
    let artifact = file.artifact.clone().unwrap_or_default();
    let jobs = match &file.job_ids[..] {
        [] => "no job".to_owned(),
        ids => format!("jobs {}", ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    };
    format!("{} {} {} bytes, uploaded by {}: {jobs}", artifact.sha256, artifact.name, artifact.size, file.uploader)
}

/// One line describing a net of the registry.
pub fn net_line(net: &v1::Net) -> String {
    let parent = match (net.generation, net.parent_id) {
        (0, _) => "none (the lineage's seed)".to_owned(),
        (_, 0) => "handcrafted".to_owned(),
        (_, id) => format!("net {id}"),
    };
    let test = if net.test_job_id == 0 { String::new() } else { format!(" by job {}", net.test_job_id) };
    format!(
        "net {} {} generation {} [{}{test}] {}: parent {parent}, data job {}, {} positions, {} epochs, \
         loss {:.5} validation {:.5}",
        net.net_id,
        net.lineage,
        net.generation,
        net.state,
        net.artifact.as_ref().map_or("", |a| a.name.as_str()),
        net.data_job_id,
        net.positions,
        net.epochs,
        net.train_loss,
        net.validation_loss
    )
}
