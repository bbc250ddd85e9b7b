// Flowise's own client (the flowise-sdk package from npm) against Flywheel's Flowise door.
// Usage: node flowise_sdk.js SDK_PATH BASE_URL API_KEY FLOW QUESTION
// Prints {"whole": <the prediction>, "events": [<each streamed event>]} as JSON.
const [, , sdkPath, baseUrl, apiKey, chatflowId, question] = process.argv;
const FlowiseClient = require(sdkPath).default;

(async () => {
  const client = new FlowiseClient({ baseUrl, apiKey });
  const whole = await client.createPrediction({ chatflowId, question });
  const events = [];
  const stream = await client.createPrediction({ chatflowId, question, streaming: true });
  for await (const event of stream) {
    events.push(event);
  }
  console.log(JSON.stringify({ whole, events }));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
